package dispatch

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node that begins to drain after its ready went out tells the edge in
// its next load report, which the edge acts on as it arrives, on the
// session's own reader: no health poll, no timer. From the report on
// nothing is granted there (a request fails over or waits), and the node
// sees no stream at all. What is granted before the report arrives (one
// round trip after the ready answer at most) is refused by the node and
// failed over: the edge cannot know sooner.
func TestDrainNoticeStopsGrantsOnArrival(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	addr := serveOnLoopback(t, f.d)
	cc := dialNode(t, addr, "n1")
	if err := cc.ReadyWith(context.Background(), &iop.NodeReadyRequest{NodeId: "n1", Adapters: f.caps("n1")}); err != nil {
		t.Fatalf("ready: %v", err)
	}
	var streams atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	// Owner: this test; ends when ctx is cancelled (below) or the
	// connection closes.
	go func() {
		defer close(served)
		_ = cc.Serve(ctx, func(_ context.Context, st *nodewire.Stream, _ *iop.Envelope) {
			streams.Add(1)
			st.Abort()
		})
	}()
	t.Cleanup(func() { cancel(); <-served })
	waitFor(t, "n1 live", func() bool { return provOf(f.d.Status(), "n1", "p").Health == "ok" })

	if err := cc.SendLoad(drainingReport("p"), time.Now().Add(waitDeadline)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the drain report at the edge", func() bool { return provOf(f.d.Status(), "n1", "p").Health == "draining" })
	if _, err := f.d.Acquire(context.Background(), Request{Model: "m", NoWait: true}); !errors.Is(err, ErrNoProvider) {
		t.Fatalf("acquire after the drain report: %v, want ErrNoProvider", err)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	waiter := f.enqueue(wctx, Request{Model: "m"})
	if got := pendingOf(f.d.Status(), "m"); got != 1 {
		t.Fatalf("pending for m = %d after the drain report, want 1", got)
	}
	select {
	case r := <-waiter:
		t.Fatalf("the waiter got %v, %v from a draining node", r.l, r.err)
	default:
	}
	if n := streams.Load(); n != 0 {
		t.Fatalf("the draining node was sent %d streams", n)
	}
}
