package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Once a name's attempt budget is spent, a lookup that names new
// addresses starts no supervisor for them: the node gives the name up
// (and exits) instead of dialling every address DNS rotates through, one
// more attempt each, for as long as another address of the name is still
// winding down.
//
// The test does not bound the attempts made before the budget ran out:
// the name's failures are counted as attempts end, so on a loaded box
// several attempts (a new address from each lookup, an address retried
// before the lookup that unlists it) can be under way when the last one
// is counted, and each of them is a legitimate hit. What it pins is the
// difference with the defect: DNS answers addresses never listed before
// only once the budget is known spent, and none of them may be dialled.
func TestSpentEdgeNameBudgetStartsNoNewAddress(t *testing.T) {
	const pool = 40
	// ips[:pool] are listed until the budget is spent, ips[pool:] only
	// after: one set of listeners, so that both share a port.
	ips := make([]string, 2*pool)
	for i := range pool {
		ips[i] = fmt.Sprintf("127.0.3.%d", i+2)
		ips[pool+i] = fmt.Sprintf("127.0.4.%d", i+2)
	}
	r := startRefusingListeners(t, ips)
	// held holds the node's connection (its attempt under way, keeping
	// the name followed and looked up) until release is closed.
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
	const max = 3
	// The budget is spent once an attempt is logged as the name's max-th
	// failure: failed sets gaveUp under the follower's mu before the
	// supervisor logs it, so a lookup that finds the line is answered
	// after the name gave up.
	core, logs := observer.New(zapcore.WarnLevel)
	var spent atomic.Bool
	budgetSpent := func() bool {
		if !spent.Load() && logs.FilterMessage("edge connect attempt failed").Filter(func(e observer.LoggedEntry) bool {
			n, _ := e.ContextMap()["attempt"].(int64)
			return n >= max
		}).Len() > 0 {
			spent.Store(true)
		}
		return spent.Load()
	}
	const wantLate = 5
	var late atomic.Int32
	lateDone := make(chan struct{})
	lateOnce := sync.OnceFunc(func() { close(lateDone) })
	// Each lookup answers the held address and one never listed before.
	stubDNS(t, func(n int) ([]string, error) {
		if !budgetSpent() {
			return []string{"127.0.3.1", ips[n%pool]}, nil
		}
		if late.Add(1) >= wantLate {
			lateOnce()
		}
		return []string{"127.0.3.1", ips[pool+n%pool]}, nil
	})
	policy := dnsPolicy(max)
	// Longer than every wait below: the held attempt ends at release, not
	// at its handshake timeout, so lookups go on after the budget is spent.
	policy.Dial.HandshakeTimeout = time.Minute
	done := make(chan error, 1)
	// Owner: the test; RunEdges returns once the budget is spent and the
	// held attempt has failed.
	go func() {
		done <- RunEdges(context.Background(), policy, []string{net.JoinHostPort("edge.test", r.port)}, true, newTestAgent(t), zap.New(core))
	}()
	select {
	case <-lateDone:
	case err := <-done:
		t.Fatalf("RunEdges returned %v while an attempt was held, after %d lookups past the budget", err, late.Load())
	case <-time.After(30 * time.Second):
		t.Fatalf("%d lookups after the budget was spent (spent: %v), want %d", late.Load(), spent.Load(), wantLate)
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
	// RunEdges waited for every supervisor, and a refusing listener
	// counts a connection before it closes it: every hit is in.
	before, after := 0, 0
	for i := range r.hits {
		if i < pool {
			before += int(r.hits[i].Load())
		} else {
			after += int(r.hits[i].Load())
		}
	}
	if before < max {
		t.Fatalf("%d attempts before the budget was spent, want at least %d", before, max)
	}
	if after != 0 {
		t.Fatalf("%d attempts at addresses first listed after the budget of %d was spent (%d lookups), want none", after, max, late.Load())
	}
}
