package dispatch

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcaps"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A refresh the edge stopped waiting for may still be applied by the node.
// The edge then no longer knows what the node runs, and the next reload
// pushes to it even when that reload goes back to the config the edge
// recorded (on the old code nothing was pushed, and the node kept running
// the config the edge believed it had never applied).
func TestLateAppliedRefreshIsPushedAgain(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	orig := f.d.cfg
	answered := make(chan struct{})
	refreshes := startApplyingNode(t, f, func(ctx context.Context) (func(), bool) {
		// Applied, but answered after the edge gave up.
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return nil, false
		}
		return func() { close(answered) }, true
	})
	rep := f.d.ReloadAndRefresh(context.Background(), buildCfg(t, oneNodeCfg(t, 3), oneNodeModels), 50*time.Millisecond)
	if got := rep["n1"]; !strings.HasPrefix(got, "error: ") {
		t.Fatalf("first reload: n1 %q, want an error (the answer comes too late)", got)
	}
	select {
	case <-answered:
	case <-time.After(waitDeadline):
		t.Fatal("the node never answered the first refresh")
	}
	// Back to the config the edge still records as running: the node runs
	// the other one, so it must be pushed.
	rep = f.d.ReloadAndRefresh(context.Background(), orig, waitDeadline)
	if got := rep["n1"]; got != "applied" {
		t.Fatalf("second reload: n1 %q (report %v), want applied: the node was left running the first reload's config", got, rep)
	}
	if got := refreshes.Load(); got != 2 {
		t.Fatalf("node received %d refreshes, want 2", got)
	}
	// Now known again: a third reload of the same config pushes nothing.
	if rep = f.d.ReloadAndRefresh(context.Background(), orig, waitDeadline); len(rep) != 0 {
		t.Fatalf("third reload pushed again: %v", rep)
	}
}

// startApplyingNode starts n1 answering every config refresh APPLIED with
// the pushed config's adapters, and waits until it is ready. Before the
// first answer it calls holdFirst, which returns whether to answer (false:
// the stream ended meanwhile) and what to run once the answer is sent (nil
// for nothing). It returns the count of refreshes received.
func startApplyingNode(t *testing.T, f *fixture, holdFirst func(ctx context.Context) (after func(), answer bool)) *atomic.Int32 {
	t.Helper()
	refreshes := new(atomic.Int32)
	startWireNode(t, f, func(n *wireNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		if first.GetNodeConfigRefreshRequest() == nil {
			return
		}
		if refreshes.Add(1) == 1 {
			after, answer := holdFirst(ctx)
			if !answer {
				return
			}
			if after != nil {
				defer after()
			}
		}
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_NodeConfigRefreshResponse{NodeConfigRefreshResponse: &iop.NodeConfigRefreshResponse{
			Status: iop.RefreshStatus_REFRESH_STATUS_APPLIED, Adapters: testcaps.For(first.GetNodeConfigRefreshRequest().GetConfig()),
		}}})
	})
	// The node's Ready returns once the answer is read; the edge
	// activates it right after writing that answer.
	waitFor(t, "n1 ready", func() bool {
		f.d.mu.Lock()
		defer f.d.mu.Unlock()
		return f.d.nodes["n1"].state == stateReady
	})
	return refreshes
}
