package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcaps"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node's APPLIED answer to a pushed config that another reload replaced
// during the round trip is not taken for the newest config: the node runs
// the pushed one, so the next reload pushes to it again.
func TestAppliedAnswerForReplacedConfigPushedAgain(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	pushed, answer := make(chan struct{}), make(chan struct{})
	first := true
	startWireNode(t, f, func(n *wireNode, ctx context.Context, st *nodewire.Stream, env *iop.Envelope) {
		req := env.GetNodeConfigRefreshRequest()
		if req == nil {
			return
		}
		if first { // handlers of one connection: only the first push waits
			first = false
			close(pushed)
			select {
			case <-answer:
			case <-ctx.Done():
				return
			}
		}
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_NodeConfigRefreshResponse{NodeConfigRefreshResponse: &iop.NodeConfigRefreshResponse{
			Status: iop.RefreshStatus_REFRESH_STATUS_APPLIED, Adapters: testcaps.For(req.GetConfig()),
		}}})
	})
	waitFor(t, "n1 ready", func() bool { return nodeOf(f.d.Status(), "n1").Connected })

	rep := make(chan map[string]string, 1)
	// Owner: the test; ends when the node answers (below) or after waitDeadline.
	go func() {
		rep <- f.d.ReloadAndRefresh(context.Background(), buildCfg(t, oneNodeCfg(t, 3), oneNodeModels), waitDeadline)
	}()
	select {
	case <-pushed:
	case <-time.After(waitDeadline):
		t.Fatal("the node never received the first push")
	}
	newest := buildCfg(t, oneNodeCfg(t, 4), oneNodeModels)
	f.d.Reload(newest) // replaced during the round trip; pushed by nobody yet
	close(answer)
	if got := (<-rep)["n1"]; got != "applied" {
		t.Fatalf("first push: %q, want applied", got)
	}
	if changed := f.d.Reload(newest); !slices.Contains(changed, "n1") {
		t.Fatalf("reload after the raced answer needs no push to n1 (%v): the node runs the replaced config", changed)
	}
}

// A tunnel waiter the node's applied config leaves no provider for (the
// answer declares its only candidate is not reached through the tunnel)
// fails as soon as the node applies it, as a new request of its kind
// would, instead of waiting out its queue timeout.
func TestAppliedConfigFailsStrandedWaiters(t *testing.T) {
	models := []tModel{{name: "m", timeout: 60, cands: []string{"n1/p"}}}
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 1), models), nil)
	// The node declared nothing at ready (so a tunnel request may wait for
	// p); its APPLIED answer declares p without the tunnel.
	startWireNode(t, f, func(_ *wireNode, _ context.Context, st *nodewire.Stream, env *iop.Envelope) {
		if env.GetNodeConfigRefreshRequest() != nil {
			_ = st.Send(&iop.Envelope{Body: &iop.Envelope_NodeConfigRefreshResponse{NodeConfigRefreshResponse: &iop.NodeConfigRefreshResponse{
				Status: iop.RefreshStatus_REFRESH_STATUS_APPLIED, Adapters: []*iop.AdapterCapabilities{{Adapter: "p"}},
			}}})
		}
	})
	waitFor(t, "n1 ready", func() bool { return nodeOf(f.d.Status(), "n1").Connected })
	l := mustAcquire(t, f.d, Request{Model: "m"})
	defer l.Release(ReasonCompleted)
	w := f.enqueue(context.Background(), Request{Model: "m", NeedsTunnel: true})

	if rep := f.d.ReloadAndRefresh(context.Background(), buildCfg(t, oneNodeCfg(t, 2), models), waitDeadline); rep["n1"] != "applied" {
		t.Fatalf("refresh: %v, want n1 applied", rep)
	}
	wantErr(t, recv(t, w).err, ErrNoCapableProvider)
}

// A node that can run the pushed config only from a new session
// (RESTART_REQUIRED) has its session ended by the edge: the generation is
// fenced (its leases return node_lost) and it is no longer dispatched to
// until it registers again with the new config.
func TestRestartRequiredEndsTheSession(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	n := startWireNode(t, f, func(_ *wireNode, _ context.Context, st *nodewire.Stream, env *iop.Envelope) {
		if env.GetNodeConfigRefreshRequest() != nil {
			_ = st.Send(&iop.Envelope{Body: &iop.Envelope_NodeConfigRefreshResponse{NodeConfigRefreshResponse: &iop.NodeConfigRefreshResponse{
				Status: iop.RefreshStatus_REFRESH_STATUS_RESTART_REQUIRED,
			}}})
		}
	})
	waitFor(t, "n1 ready", func() bool { return nodeOf(f.d.Status(), "n1").Connected })
	l := mustAcquire(t, f.d, Request{Model: "m"})
	if rep := f.d.ReloadAndRefresh(context.Background(), buildCfg(t, oneNodeCfg(t, 3), oneNodeModels), waitDeadline); rep["n1"] != "restart_required" {
		t.Fatalf("refresh: %v, want n1 restart_required", rep)
	}
	if ok, why := l.Released(); !ok || why != ReasonNodeLost {
		t.Fatalf("lease after restart_required: released %v, %s; want node_lost", ok, why)
	}
	if nodeOf(f.d.Status(), "n1").Connected {
		t.Fatal("node still connected after restart_required")
	}
	n.h.waitClosed(t, n.h.conn(0))
}
