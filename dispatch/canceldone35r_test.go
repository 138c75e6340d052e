package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// streamWindow is nodewire's initial stream window (muxWindow): a request
// frame of exactly this size is sent without waiting and leaves the edge
// no credit until the node reads it.
const streamWindow = 256 << 10

// windowSizedTunnel is a tunnel request on l whose frame is exactly
// streamWindow bytes.
func windowSizedTunnel(t *testing.T, l *Lease) *iop.ProviderTunnelRequest {
	t.Helper()
	// With what OpenTunnel adds.
	req := &iop.ProviderTunnelRequest{RunId: "run_1", Method: "POST", Path: "/chat/completions", Adapter: l.ProviderID, Target: l.Target}
	for n := streamWindow; n > 0; n-- {
		req.Body = []byte(strings.Repeat("x", n))
		fr, err := nodewire.AppendFrame(nil, &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: req}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(fr) == streamWindow {
			return req
		}
		if len(fr) < streamWindow {
			break
		}
		n -= len(fr) - streamWindow - 1
	}
	t.Fatal("no body length makes the request frame the window's size")
	return nil
}

// The client gone (the stream's done channel closed) while the edge has
// no window credit left: the CancelRequest still goes out once the node
// reads and grants credit (Cancel clears done before its send), rather
// than failing at once with nodewire.ErrDone, which would mark the cancel
// failed, skip the drain and return the lease while the node runs on.
func TestCancelAfterCallerDoneWaitsForCredit35r(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	n := startWireNode(t, f, nil) // serves nothing yet: the request lies unread
	l := mustAcquire(t, f.d, Request{Model: "m"})
	ts, err := l.OpenTunnel(context.Background(), time.Now().Add(waitDeadline), windowSizedTunnel(t, l))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	close(done)
	ts.SetDone(done)
	if _, err := ts.RecvBy(time.Now().Add(waitDeadline)); !errors.Is(err, ErrCallerDone) {
		t.Fatalf("RecvBy after done: %v, want ErrCallerDone", err)
	}
	cancelled := make(chan struct{})
	go func() { // Owner: the test; Cancel's send is bounded by cancelSendTimeout.
		ts.Cancel("client_disconnect")
		close(cancelled)
	}()
	// Now the node reads: the request, which grants the edge its window
	// back, then the CancelRequest waiting for it.
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { // Owner: the test (cleanup); ends when ctx is cancelled or the connection closes.
		defer close(served)
		_ = n.cc.Serve(ctx, func(hctx context.Context, st *nodewire.Stream, first *iop.Envelope) { silentNode(n, hctx, st, first) })
	}()
	t.Cleanup(func() { stop(); <-served })
	if first := n.next(t); first.GetProviderTunnelRequest() == nil {
		t.Fatalf("the node got %v first, want the request", first)
	}
	if env := n.next(t); env.GetCancelRequest().GetKind() != iop.CancelKind_CANCEL_KIND_CANCEL_RUN {
		t.Fatalf("the node got %v after the request, want CANCEL_RUN", env)
	}
	select {
	case <-cancelled:
	case <-time.After(waitDeadline):
		t.Fatal("Cancel still sending after the node got it")
	}
	ts.Close()
	l.Release(ReasonCancelled)
}
