package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

// Once a name's attempt budget is spent, a lookup that names new
// addresses starts no supervisor for them: the node gives the name up
// (and exits) instead of dialling every address DNS rotates through, one
// more attempt each, for as long as another address of the name is still
// winding down.
func TestSpentEdgeNameBudgetStartsNoNewAddress(t *testing.T) {
	const pool = 40
	ips := make([]string, pool)
	for i := range ips {
		ips[i] = fmt.Sprintf("127.0.3.%d", i+2)
	}
	r := startRefusingListeners(t, ips)
	// held holds the node's connection (its attempt under way) until
	// release is closed.
	held, err := net.Listen("tcp", net.JoinHostPort("127.0.3.1", r.port))
	if err != nil {
		t.Skipf("cannot listen on 127.0.3.1:%s: %v", r.port, err)
	}
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { _ = held.Close() })
	t.Cleanup(releaseOnce)
	wg.Add(1)
	// Owner: the test; stops at held.Close in Cleanup.
	go func() {
		defer wg.Done()
		for {
			c, err := held.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			// Owner: the test; ends at release.
			go func() { defer wg.Done(); <-release; _ = c.Close() }()
		}
	}()
	// Each lookup answers the held address and a new refusing one.
	lookups := stubDNS(t, func(n int) ([]string, error) {
		return []string{"127.0.3.1", ips[n%pool]}, nil
	})
	const max = 3
	done := make(chan error, 1)
	// Owner: the test; RunEdges returns once the budget is spent and the
	// held attempt has failed.
	go func() {
		done <- RunEdges(context.Background(), dnsPolicy(max), []string{net.JoinHostPort("edge.test", r.port)}, true, newTestAgent(t), zap.NewNop())
	}()
	// The refusing addresses spend the budget (max lookups at least),
	// then several more lookups come while the held attempt is under way.
	deadline := time.Now().Add(30 * time.Second)
	for lookups.Load() < max+8 {
		if time.Now().After(deadline) {
			t.Fatalf("%d lookups", lookups.Load())
		}
		time.Sleep(time.Millisecond)
	}
	releaseOnce()
	select {
	case err := <-done:
		if !errors.Is(err, ErrAttemptsExhausted) {
			t.Fatalf("err = %v, want exhaustion", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunEdges did not return")
	}
	total := 0
	for i := range r.hits {
		total += int(r.hits[i].Load())
	}
	// The budget, and at most one more attempt: one under way at an
	// address just unlisted when the budget ran out.
	if total > max+1 {
		t.Fatalf("%d attempts at the refusing addresses with a budget of %d, want at most %d", total, max, max+1)
	}
}
