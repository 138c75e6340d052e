package stack

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TestMain ignores no goroutine: an ignored internal/poll.runtime_pollWait
// would hide every leaked listener and connection reader, and the
// persistConn loops every client connection left open.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// twoNodes is a model "demo" served by mock providers on nodes a and b, one
// slot each.
func twoNodes(delayMS string) *config.Edge {
	prov := func() []config.ProviderSpec {
		return []config.ProviderSpec{{Name: "m", Type: "mock", Capacity: 1, Extra: map[string]any{"delay_ms": delayMS}}}
	}
	return &config.Edge{
		Nodes: []config.NodeSpec{
			{ID: "a", Token: "ta", HeartbeatIntervalSec: 0.05, HeartbeatTimeoutSec: 1, Providers: prov()},
			{ID: "b", Token: "tb", HeartbeatIntervalSec: 0.05, HeartbeatTimeoutSec: 1, Providers: prov()},
		},
		Models: []config.ModelSpec{{Name: "demo", QueueTimeoutSec: 20, Providers: []config.ModelProvider{
			{Node: "a", Provider: "m", Target: "x"}, {Node: "b", Provider: "m", Target: "x"},
		}}},
	}
}

type grant struct {
	l   *dispatch.Lease
	err error
}

func acquireAsync(d *dispatch.Dispatcher, ctx context.Context) chan grant {
	ch := make(chan grant, 1)
	go func() {
		l, err := d.Acquire(ctx, dispatch.Request{Model: "demo"})
		ch <- grant{l, err}
	}()
	return ch
}

// Waiters queued while the node is only pending are served the moment it
// becomes ready, and not before.
func TestWaitersServedWhenPendingNodeBecomesReady(t *testing.T) {
	e := StartEdge(t, twoNodes("0"), EdgeOptions{})
	d := e.Dispatcher
	conn, resp, err := nodewire.Dial(context.Background(), nodewire.DialConfig{Address: e.NodeAddr}, &iop.RegisterRequest{NodeId: "a", Token: "ta"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if len(resp.GetConfig().GetAdapters()) != 1 {
		t.Fatalf("payload: %v", resp.GetConfig())
	}
	ch := acquireAsync(d, context.Background())
	WaitFor(t, 5*time.Second, "the request to queue", func() bool { return d.Status().Models[0].Pending == 1 })
	select {
	case g := <-ch:
		t.Fatalf("granted while the node is only pending: %+v", g)
	default:
	}
	if st := d.Status(); st.Nodes[0].Connected || st.Nodes[0].Providers[0].Status != "unavailable" {
		t.Fatalf("pending node shown as connected: %+v", st.Nodes[0])
	}
	if err := conn.Ready(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-ch:
		if g.err != nil || g.l.NodeID != "a" {
			t.Fatalf("grant = %+v", g)
		}
		g.l.Release(dispatch.ReasonCompleted)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not served at ready")
	}
}

// A node killed while holding leases returns each exactly once (node_lost),
// and waiters move to the remaining node.
func TestNodeLossReturnsLeasesOnceAndWaitersMove(t *testing.T) {
	e := StartEdge(t, twoNodes("0"), EdgeOptions{})
	d := e.Dispatcher
	na := StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "ta"})
	StartNode(t, e.NodeAddr, "b", NodeOptions{Token: "tb"})
	e.WaitReady(t, "a", 10*time.Second)
	e.WaitReady(t, "b", 10*time.Second)

	la, err := d.Acquire(context.Background(), dispatch.Request{Model: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := d.Acquire(context.Background(), dispatch.Request{Model: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if la.NodeID == lb.NodeID {
		t.Fatalf("both leases on %s", la.NodeID)
	}
	onA, onB := la, lb
	if la.NodeID == "b" {
		onA, onB = lb, la
	}
	ch := acquireAsync(d, context.Background())
	WaitFor(t, 5*time.Second, "the waiter to queue", func() bool { return d.Status().Models[0].Pending == 1 })

	na.Stop() // node a goes away: its connection closes
	WaitFor(t, 10*time.Second, "a's lease to return", func() bool { released, _ := onA.Released(); return released })
	if _, reason := onA.Released(); reason != dispatch.ReasonNodeLost {
		t.Fatalf("reason = %s, want node_lost", reason)
	}
	if onA.Release(dispatch.ReasonCompleted) {
		t.Fatal("a fenced lease was released a second time")
	}
	// The waiter moves to b as soon as b has room.
	onB.Release(dispatch.ReasonCompleted)
	select {
	case g := <-ch:
		if g.err != nil || g.l.NodeID != "b" {
			t.Fatalf("waiter got %+v, want a lease on b", g)
		}
		g.l.Release(dispatch.ReasonCompleted)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not move to b")
	}
	for _, n := range d.Status().Nodes {
		for _, p := range n.Providers {
			if p.InFlight != 0 || p.Queued != 0 {
				t.Fatalf("%s/%s not settled: %+v", n.ID, p.ProviderId, p)
			}
		}
	}
}

// A streaming client whose node dies mid-stream gets an explicit error
// event, never [DONE], and never hangs.
func TestStreamFailsExplicitlyWhenNodeDies(t *testing.T) {
	cfg := twoNodes("100")
	cfg.Models[0].Providers = cfg.Models[0].Providers[:1]
	e := StartEdge(t, cfg, EdgeOptions{})
	na := StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "ta"})
	e.WaitReady(t, "a", 10*time.Second)
	body := `{"model":"demo","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("w ", 100) + `"}]}`
	resp, err := http.Post(e.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	killed := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				continue
			}
			lines = append(lines, line)
			if len(lines) == 3 && !killed {
				killed = true
				go na.Stop()
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("client hung after the node died")
	}
	last := lines[len(lines)-1]
	if !strings.Contains(last, `"error"`) || strings.Contains(strings.Join(lines, "\n"), "[DONE]") {
		t.Fatalf("stream ended with %q (lines %d); want an error event and no [DONE]", last, len(lines))
	}
	WaitFor(t, 5*time.Second, "lease return", func() bool { return e.Dispatcher.Status().Nodes[0].Providers[0].InFlight == 0 })
}
