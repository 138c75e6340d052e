package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// openWithin runs OpenTunnel of big on l in its own goroutine, bounded
// by deadline (a safety net: the caller expects ctx to end it first).
func openWithin(l *Lease, ctx context.Context, deadline time.Time, big *iop.ProviderTunnelRequest) <-chan error {
	res := make(chan error, 1)
	go func() { // Owner: the test; ends when OpenTunnel returns (ctx, or deadline).
		_, err := l.OpenTunnel(ctx, deadline, big)
		res <- err
	}()
	return res
}

// Sending a request larger than the stream window to a node that never
// reads ends with context.Canceled once the client goes away (ctx
// cancelled), though the response deadline is far off: the send's waits
// observe ctx's Done (nodewire.Stream.SetDone). Both orders: ctx already
// cancelled when the send begins (deterministic: the window's first
// 256 KiB go, then the wait for credit must see done) and cancelled while
// the send waits. Without the bound the send holds until the deadline.
func TestOpenSendEndsWhenClientGoes35r(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	startWireNode(t, f, nil)
	big := &iop.ProviderTunnelRequest{RunId: "run_1", Method: "POST", Path: "/chat/completions", Body: []byte(strings.Repeat("x", 1<<20))}
	const bound = 5 * time.Second

	check := func(what string, res <-chan error, since time.Time) {
		t.Helper()
		select {
		case err := <-res:
			if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNodeLost) {
				t.Errorf("%s: open %v, want context.Canceled", what, err)
			}
			if took := time.Since(since); took > bound {
				t.Errorf("%s: open returned %s after the cancellation", what, took)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: open still sending 30 s after the cancellation", what)
		}
	}

	l := mustAcquire(t, f.d, Request{Model: "m"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	check("ctx cancelled before", openWithin(l, ctx, start.Add(20*time.Second), big), start)
	l.Release(ReasonError)

	l = mustAcquire(t, f.d, Request{Model: "m"})
	opened := l.conn.Stats().StreamsOpened
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	res := openWithin(l, ctx, time.Now().Add(20*time.Second), big)
	// The stream is open: the send is about to begin, or has begun (its
	// window used up, it then waits for credit).
	deadline := time.Now().Add(waitDeadline)
	for l.conn.Stats().StreamsOpened == opened {
		if time.Now().After(deadline) {
			t.Fatal("the request send never began")
		}
		select {
		case err := <-res:
			t.Fatalf("open returned before the cancellation: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	check("ctx cancelled while sending", res, time.Now())
	l.Release(ReasonError)
}
