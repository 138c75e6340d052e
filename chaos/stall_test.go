package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/internal/faultproxy"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
)

// A node whose connection stops delivering in both directions but stays
// open is fenced by the heartbeat timeout: each of its leases returns
// exactly once (node_lost), its streaming and waiting clients get explicit
// errors, a request queued for it moves to a healthy node, and the node
// reconnects once the network delivers again.
//
// Layout: node a (behind the proxy; heartbeat 0.1 s / 2 s; 3 slots) and
// node b (direct; 1 slot). Model only-a and only-b pin a node, model either
// has both. a's three slots are held by a stream (S1), a non-streamed
// request (N1) and a lease taken directly from the dispatcher (L); b's slot
// by a long stream (S2); so a request Q for either has to queue.
//
// A heartbeat timeout can still fire by itself on a machine loaded enough
// (race detector, two cores shared with other jobs); the 2 s timeout makes
// that rare. When it happens before the freeze, the attempt proves nothing
// and is repeated (up to 3); a test whose every attempt was void fails: it
// has shown nothing.
func TestStallFencedByHeartbeat(t *testing.T) {
	const attempts = 3
	var voids []string
	for i := 1; i <= attempts; i++ {
		var void string
		t.Run(fmt.Sprintf("attempt%d", i), func(t *testing.T) {
			if void = stallScenario(t); void != "" {
				t.Skip(void)
			}
		})
		if void == "" {
			return
		}
		voids = append(voids, void)
	}
	t.Fatalf("all %d attempts void, nothing was shown: %s", attempts, strings.Join(voids, "; "))
}

// stallScenario runs one attempt. It returns why the attempt is void ("" when
// it ran to the end; failures are reported on t).
func stallScenario(t *testing.T) string {
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{
			nodeSpec("a", "tok-a", 0.1, 2, mockProvider("m", 20, 3)),
			// b's heartbeat is relaxed so a loaded machine cannot fence it by
			// accident: this test needs it healthy throughout.
			nodeSpec("b", "tok-b", 0.5, 10, mockProvider("m", 20, 1)),
		},
		Models: []config.ModelSpec{
			model("only-a", 30, [2]string{"a", "m"}),
			model("only-b", 30, [2]string{"b", "m"}),
			model("either", 30, [2]string{"a", "m"}, [2]string{"b", "m"}),
		},
	}
	log := quietLogger(t)
	e := stack.StartEdge(t, cfg, stack.EdgeOptions{Logger: log})
	d, reg := e.Dispatcher, e.Registry
	px, err := faultproxy.New(e.NodeAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	defer px.Unfreeze() // never leave a frozen proxy to the cleanups
	stack.StartNode(t, px.Addr(), "a", stack.NodeOptions{Token: "tok-a", Logger: log,
		Dial: &nodewire.DialConfig{Address: px.Addr(), Logger: log, HandshakeTimeout: 2 * time.Second}})
	stack.StartNode(t, e.NodeAddr, "b", stack.NodeOptions{Token: "tok-b", Logger: log})
	e.WaitReady(t, "a", waitLong)
	e.WaitReady(t, "b", waitLong)

	c := newClient(t)
	rng := rand.New(rand.NewPCG(1, 2))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // the hang bound
	defer cancel()
	// lostA: a's session ended — before the freeze, only by itself.
	lostA := func() bool {
		return metric(t, reg, "iop_node_sessions_total", map[string]string{"node": "a", "outcome": "lost"}) > 0
	}
	const spurious = "a's heartbeat timed out by itself before the freeze"
	setup := func(what string, cond func() bool) bool {
		waitFor(t, waitLong, what, func() bool { return cond() || lostA() })
		return !lostA()
	}

	// S1 streams from a (300 words at 20 ms: ~6 s unless cut short).
	var firstS1 sync.Once
	s1Started := make(chan struct{})
	s1 := chatAsync(ctx, c, e.URL, "only-a", randWords(rng, 300), true, func() { firstS1.Do(func() { close(s1Started) }) })
	select {
	case <-s1Started:
	case r := <-s1:
		if lostA() {
			return spurious
		}
		t.Fatalf("S1 ended before streaming: %+v", r)
	case <-time.After(waitLong):
		t.Fatal("S1 did not start streaming")
	}
	// N1 waits for a's whole answer.
	n1 := chatAsync(ctx, c, e.URL, "only-a", randWords(rng, 300), false, nil)
	if !setup("N1's lease on a", func() bool { return inFlight(d, "a") == 2 }) {
		return spurious
	}
	l, err := d.Acquire(ctx, dispatch.Request{Model: "only-a"})
	if err != nil || l.NodeID != "a" {
		t.Fatalf("direct lease: %v %+v", err, l)
	}
	defer l.Release(dispatch.ReasonCompleted) // a no-op once fenced
	// S2 keeps b busy for ~3 s; Q has to queue behind it.
	s2 := chatAsync(ctx, c, e.URL, "only-b", randWords(rng, 150), true, nil)
	if !setup("S2's lease on b", func() bool { return inFlight(d, "b") == 1 }) {
		return spurious
	}
	qWords := randWords(rng, 5)
	q := chatAsync(ctx, c, e.URL, "either", qWords, false, nil)
	if !setup("Q to queue", func() bool { return pending(d, "either") == 1 }) {
		return spurious
	}

	lostBefore := metric(t, reg, "iop_lease_released_total", map[string]string{"node": "a", "reason": "node_lost"})
	frozeAt := time.Now()
	px.Freeze()
	if lostA() || inFlight(d, "a") != 3 {
		return spurious // between the last check and the freeze
	}

	waitFor(t, waitLong, "a's direct lease to return", func() bool { ok, _ := l.Released(); return ok })
	fencedAfter := time.Since(frozeAt)
	if _, reason := l.Released(); reason != dispatch.ReasonNodeLost {
		t.Errorf("direct lease released with %q, want node_lost", reason)
	}
	if l.Release(dispatch.ReasonCompleted) {
		t.Error("a fenced lease was released a second time")
	}
	if connected(d, "a") {
		t.Error("a still connected after its lease was fenced")
	}

	r1 := await(t, s1, waitLong, "S1")
	if r1.violation != "" || r1.kind != "sse upstream_error" {
		t.Errorf("S1 (streaming through the stalled node): kind %q violation %q, want an SSE error event and no [DONE]", r1.kind, r1.violation)
	}
	rN := await(t, n1, waitLong, "N1")
	if rN.violation != "" || rN.kind != "502 upstream_error" {
		t.Errorf("N1 (waiting on the stalled node): kind %q violation %q, want 502 upstream_error", rN.kind, rN.violation)
	}
	// Q moves to b once S2 is done, while a is still stalled.
	rq := await(t, q, waitLong, "Q")
	// All three leases of a came back exactly once, as node_lost, in the
	// same fencing step.
	lost := metric(t, reg, "iop_lease_released_total", map[string]string{"node": "a", "reason": "node_lost"}) - lostBefore
	// The known fence race (bugs_test.go) shows as: one of a's leases
	// returned (as error) before the fence, and Q, handed the freed slot on
	// the dying a, got 502 (node_lost then counts Q's lease instead). Every
	// other property is still checked; the attempt ends as skipped naming
	// the bug.
	knownBug := rq.kind == "502 upstream_error" && !strict()
	if knownBug {
		t.Logf("node_lost %v, Q %q: the known %s", lost, rq.kind, bugFenceRace)
	} else {
		if lost != 3 {
			t.Errorf("a's leases released as node_lost: %v, want 3", lost)
		}
		if !rq.ok {
			t.Errorf("Q (queued while a stalled): kind %q violation %q, want a complete answer from b", rq.kind, rq.violation)
		}
		if metric(t, reg, "iop_lease_acquired_total", map[string]string{"node": "b"}) != 2 {
			t.Errorf("Q was not served by b (b acquired %v leases, want 2)", metric(t, reg, "iop_lease_acquired_total", map[string]string{"node": "b"}))
		}
	}
	if acq, rel := metric(t, reg, "iop_lease_acquired_total", map[string]string{"node": "a"}),
		metric(t, reg, "iop_lease_released_total", map[string]string{"node": "a"}); acq != rel {
		t.Errorf("a: leases acquired %v, released %v", acq, rel)
	}
	if connected(d, "a") {
		t.Error("a reconnected through a frozen network")
	}
	if r2 := await(t, s2, waitLong, "S2"); !r2.ok {
		t.Errorf("S2 on the healthy node: kind %q violation %q", r2.kind, r2.violation)
	}
	stalledFor := time.Since(frozeAt)

	// The network heals: a reconnects and serves again.
	px.Unfreeze()
	thawed := time.Now()
	waitFor(t, waitLong, "a to reconnect after the stall", func() bool { return connected(d, "a") })
	reconnectAfter := time.Since(thawed)
	// (A later self-inflicted heartbeat timeout may fail one request: a
	// few tries.)
	for try := 1; ; try++ {
		r := doChat(ctx, c, e.URL, "only-a", randWords(rng, 5), true)
		if r.ok {
			break
		}
		if try == 3 || r.violation != "" {
			t.Errorf("a after reconnecting: kind %q violation %q", r.kind, r.violation)
			break
		}
		waitFor(t, waitLong, "a to reconnect", func() bool { return connected(d, "a") })
	}
	waitSettled(t, d, reg)
	sessionsLost := metric(t, reg, "iop_node_sessions_total", map[string]string{"node": "a", "outcome": "lost"})
	if sessionsLost < 1 {
		t.Errorf("a's sessions lost: %v, want at least 1", sessionsLost)
	}
	t.Logf("stall: fenced %s after the freeze (heartbeat timeout 2s); stalled %s; reconnected %s after the thaw; node_lost leases %v, sessions lost %v",
		fencedAfter.Round(time.Millisecond), stalledFor.Round(time.Millisecond), reconnectAfter.Round(time.Millisecond), lost, sessionsLost)
	if knownBug {
		t.Skip(bugFenceRace)
	}
	return ""
}
