package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// Leases the ledger lost (its data flushed, as a Redis restarted without
// persistence) are reported by Renew, live ones are not, and OpReadd puts
// a lost one back in both its sets, past the capacity: the work it counts
// is running, so the other edges must see the provider full.
func TestRenewReportsLostLeasesAndReaddPutsThemBack(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	a, b := ledger(t, rs.Addr, "a", time.Minute), ledger(t, rs.Addr, "b", time.Minute)
	key := Key("n", "p")
	lost, kept := a.NewLeaseID(), a.NewLeaseID()
	if out, err := a.Take(ctx, key, 1, 1, true, lost, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	if err := a.Client().FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if out, err := b.Take(ctx, key, 1, 1, false, b.NewLeaseID(), "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("b's take after the flush: %v %v", out, err)
	}
	if out, err := a.Take(ctx, Key("n", "q"), 1, 1, false, kept, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	missing, err := a.Renew(ctx, map[string][]HeldLease{key: {{ID: lost, Long: true}}, Key("n", "q"): {{ID: kept}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || len(missing[key]) != 1 || missing[key][0] != lost {
		t.Fatalf("missing %v, want only %s on %s", missing, lost, key)
	}
	if err := a.Apply(ctx, []Update{{Kind: OpReadd, Key: key, ID: lost, Long: true}}); err != nil {
		t.Fatal(err)
	}
	held, err := a.Held(ctx, []string{key, key + ":long"})
	if err != nil || held[key] != 2 || held[key+":long"] != 1 {
		t.Fatalf("after the re-add held %v (%v), want 2 leases, 1 long", held, err)
	}
	if out, err := b.Take(ctx, key, 2, 2, false, b.NewLeaseID(), "", "", 0, 0); out != Full || err != nil {
		t.Fatalf("take at capacity 2 after the re-add: %v %v, want Full", out, err)
	}
	// Put back, the lease renews as any other.
	if missing, err := a.Renew(ctx, map[string][]HeldLease{key: {{ID: lost, Long: true}}}); err != nil || len(missing) != 0 {
		t.Fatalf("renewal after the re-add: missing %v (%v), want none", missing, err)
	}
}

// closeBegun calls l.Close in the background and returns once Close has
// begun; the channel is closed when Close returns.
func closeBegun(t *testing.T, l *Ledger) <-chan struct{} {
	t.Helper()
	closed := make(chan struct{})
	// Owner: the test; Close returns once the work of Go has ended.
	go func() {
		_ = l.Close()
		close(closed)
	}()
	waitClosing := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		closing := l.closing
		l.mu.Unlock()
		if closing {
			break
		}
		if time.Now().After(waitClosing) {
			t.Fatal("Close never began")
		}
		time.Sleep(time.Millisecond)
	}
	return closed
}

// Close waits for work begun with Go (a return sent after its dispatcher
// closed), and once it has begun Go runs nothing.
func TestCloseWaitsForWorkOfGo(t *testing.T) {
	rs := testredis.Start(t)
	l := Open(Config{Address: rs.Addr, TTL: time.Minute, Timeout: time.Second, EdgeID: "a"})
	key := Key("n", "p")
	id := l.NewLeaseID()
	ctx := context.Background()
	if out, err := l.Take(ctx, key, 1, 1, false, id, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	started, proceed := make(chan struct{}), make(chan struct{})
	var applyErr error
	if !l.Go(func() {
		close(started)
		<-proceed
		applyErr = l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id}})
	}) {
		t.Fatal("Go refused before Close")
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the work Go accepted not started within 10s")
	}
	closed := closeBegun(t, l)
	if l.Go(func() { t.Error("Go ran work after Close began") }) {
		t.Error("Go accepted work after Close began")
	}
	close(proceed)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if applyErr != nil {
		t.Fatalf("the return begun before Close: %v", applyErr)
	}
	probe := ledger(t, rs.Addr, "probe", time.Minute)
	if held, err := probe.Held(ctx, []string{key}); err != nil || held[key] != 0 {
		t.Fatalf("held %v (%v) after the return, want 0", held, err)
	}
}
