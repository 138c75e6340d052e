package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcaps"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A reload while a node is registered but not yet ready (it is starting
// the adapters of the config its registration answer carried) cannot push
// to it, and the node then goes ready running the old config. The edge
// pushes the current config to it once it is ready, as the reload would
// have: on the old code nothing was ever pushed, and the node ran the old
// config (and the edge routed by it) until the next reload or reconnect.
func TestReloadWhilePendingIsPushedOnReady(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	_, addr := startWire(t, f)
	cc := dialNode(t, addr, "n1") // accepted: pending, running capacity 2

	if changed := f.d.Reload(buildCfg(t, oneNodeCfg(t, 3), oneNodeModels)); len(changed) != 0 {
		t.Fatalf("reload pushed to a pending node: %v", changed)
	}
	pushed := make(chan *iop.NodeConfigPayload, 4)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	// Owner: the test (cleanup). Stops when ctx is cancelled or the
	// connection closes; Serve waits for its handlers.
	go func() {
		defer close(served)
		_ = cc.Serve(ctx, func(_ context.Context, st *nodewire.Stream, first *iop.Envelope) {
			req := first.GetNodeConfigRefreshRequest()
			if req == nil {
				return
			}
			pushed <- req.GetConfig()
			_ = st.Send(&iop.Envelope{Body: &iop.Envelope_NodeConfigRefreshResponse{NodeConfigRefreshResponse: &iop.NodeConfigRefreshResponse{
				Status: iop.RefreshStatus_REFRESH_STATUS_APPLIED, Adapters: testcaps.For(req.GetConfig()),
			}}})
		})
	}()
	t.Cleanup(func() { cancel(); <-served })
	if err := cc.Ready(context.Background(), "n1"); err != nil {
		t.Fatalf("ready: %v", err)
	}
	select {
	case p := <-pushed:
		if got := p.GetAdapters()[0].GetCapacity(); got != 3 {
			t.Fatalf("pushed capacity %d, want the reloaded 3", got)
		}
	case <-time.After(waitDeadline):
		t.Fatal("the node never received the config reloaded while it was pending")
	}
	waitFor(t, "the edge to record the applied config", func() bool {
		n := nodeOf(f.d.Status(), "n1")
		p := provOf(f.d.Status(), "n1", "p")
		return n.Connected && n.ConfigVersion == n.DesiredConfigVersion && p.Capacity == 3
	})
}
