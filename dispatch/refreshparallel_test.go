package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcaps"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A reload's refreshes go out together, not one node after another: each
// node here answers only once both have received theirs. One at a time,
// the first node's push waited out its whole bound before the second was
// sent (so a reload touching many silent nodes took that bound times
// their number, with every later reload held back).
func TestReloadRefreshesNodesTogether(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	_, addr := startWire(t, f)

	var (
		mu      sync.Mutex
		arrived int
		both    = make(chan struct{})
	)
	handle := func(ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		req := first.GetNodeConfigRefreshRequest()
		if req == nil {
			return
		}
		mu.Lock()
		if arrived++; arrived == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-ctx.Done():
			return
		}
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_NodeConfigRefreshResponse{NodeConfigRefreshResponse: &iop.NodeConfigRefreshResponse{
			Status: iop.RefreshStatus_REFRESH_STATUS_APPLIED, Adapters: testcaps.For(req.GetConfig()),
		}}})
	}
	for _, id := range []string{"n1", "n2"} {
		cc := dialNode(t, addr, id)
		if err := cc.Ready(context.Background(), id); err != nil {
			t.Fatalf("%s ready: %v", id, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan struct{})
		// Owner: the test (cleanup). Stops when ctx is cancelled or the
		// connection closes; Serve waits for its handlers.
		go func() {
			defer close(served)
			_ = cc.Serve(ctx, handle)
		}()
		t.Cleanup(func() { cancel(); <-served })
		waitFor(t, id+" ready", func() bool {
			f.d.mu.Lock()
			defer f.d.mu.Unlock()
			return f.d.nodes[id].state == stateReady
		})
	}

	next := buildCfg(t, []tNode{{id: "n1", provs: []tProv{{name: "p", cap: 3}}}, {id: "n2", provs: []tProv{{name: "q", cap: 2}}}}, oneNodeModels)
	rep := f.d.ReloadAndRefresh(context.Background(), next, 3*time.Second)
	if rep["n1"] != "applied" || rep["n2"] != "applied" || len(rep) != 2 {
		t.Fatalf("reload report %v, want both nodes applied", rep)
	}
}
