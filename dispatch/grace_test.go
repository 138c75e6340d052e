package dispatch

import (
	"context"
	"errors"
	"github.com/iop-gateway/iop/nodewire"
	"testing"
	"time"
)

// graceFixture: model "m" on a/p (capacity 1) with offline_grace_sec grace
// and a 5 s queue timeout.
func graceFixture(t *testing.T, grace float64) *fixture {
	t.Helper()
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}},
		[]tModel{{name: "m", timeout: 5, cands: []string{"a/p"}}})
	cfg.Models[0].OfflineGraceSec = &grace
	return newFixture(t, cfg, nil)
}

// acquireFails requires Acquire to fail with ErrNoProvider at once, not
// after the queue timeout.
func acquireFails(t *testing.T, f *fixture) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	l, err := f.d.Acquire(ctx, Request{Model: "m"})
	if !errors.Is(err, ErrNoProvider) {
		t.Fatalf("acquire: lease %v, err %v; want ErrNoProvider", l, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("failed after %s, want at once (queue timeout is 5 s)", took)
	}
}

func TestOfflineGraceNeverConnected(t *testing.T) {
	f := graceFixture(t, 0.2)
	// Inside the grace after start (nodes reconnecting to a restarted
	// edge), a request queues and is served when the node becomes ready.
	ch := f.enqueue(context.Background(), Request{Model: "m"})
	time.Sleep(300 * time.Millisecond) // past the grace while queued
	f.up("a")
	recvLease(t, ch).Release(ReasonCompleted)
	// After the node goes away and the grace passes, requests fail fast.
	c := f.d.nodeForTest("a")
	f.d.Closed(c, errors.New("test: gone"))
	time.Sleep(300 * time.Millisecond)
	acquireFails(t, f)
	// Back again: served.
	f.up("a")
	mustAcquire(t, f.d, Request{Model: "m"}).Release(ReasonCompleted)
}

func TestOfflineGraceAfterStart(t *testing.T) {
	f := graceFixture(t, 0.1)
	time.Sleep(200 * time.Millisecond)
	acquireFails(t, f)
}

// Inside the grace after a node is lost, a request queues (the node
// usually reconnects within seconds) and a reconnect serves it.
func TestOfflineGraceQueuesInsideGrace(t *testing.T) {
	f := graceFixture(t, 30)
	c := f.up("a")
	f.d.Closed(c, errors.New("test: gone"))
	ch := f.enqueue(context.Background(), Request{Model: "m"})
	f.up("a")
	recvLease(t, ch).Release(ReasonCompleted)
}

// offline_grace_sec 0 keeps the old behaviour: wait the queue timeout.
func TestOfflineGraceZeroQueues(t *testing.T) {
	f := graceFixture(t, 0)
	time.Sleep(50 * time.Millisecond)
	ch := f.enqueue(context.Background(), Request{Model: "m"})
	f.up("a")
	recvLease(t, ch).Release(ReasonCompleted)
}

// nodeForTest returns node id's current owner connection.
func (d *Dispatcher) nodeForTest(id string) *nodewire.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nodes[id].owner
}
