package nodeagent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// watchedStream connects a node-side nodewire client to a fake edge, opens
// one stream from the edge and returns both ends: the edge's, and the
// node's as its stream handler got it (after the first envelope).
func watchedStream(t *testing.T) (edge, node *nodewire.Stream) {
	t.Helper()
	p := mockPayload(1)
	p.Heartbeat.TimeoutMs = 30000
	fe := startFakeEdge(t, p, nil)
	ctx, cancel := context.WithCancel(context.Background())
	conn, resp, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: fe.addr, HandshakeTimeout: 5 * time.Second},
		&iop.RegisterRequest{ProtocolVersion: nodewire.ProtocolVersion, NodeId: "n1", Token: "tok"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := conn.ReadyWith(ctx, &iop.NodeReadyRequest{NodeId: resp.GetNodeId()}); err != nil {
		cancel()
		t.Fatal(err)
	}
	streams := make(chan *nodewire.Stream, 1)
	hold := make(chan struct{})
	served := make(chan struct{})
	// Owner: the test; Serve ends at cancel in Cleanup, after hold lets
	// the handler return.
	go func() {
		defer close(served)
		_ = conn.Serve(ctx, func(_ context.Context, st *nodewire.Stream, _ *iop.Envelope) {
			streams <- st
			<-hold
		})
	}()
	t.Cleanup(func() { close(hold); cancel(); conn.Close(); <-served })
	ec := fe.nextReady(t)
	est, err := ec.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{RunId: "r1"}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-streams:
		return est, st
	case <-time.After(10 * time.Second):
		t.Fatal("the node got no stream")
		return nil, nil
	}
}

// stopWithin runs w.stop(wait) and fails unless it returns within limit.
func stopWithin(t *testing.T, w *cancelWatch, wait, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	// Owner: the test; stop returns at its deadline (the point of the test).
	go func() { defer close(done); w.stop(wait) }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("stop(%v) still waiting after %v", wait, limit)
	}
}

// An Edge that neither closes its side nor sends anything after the
// terminal message holds the finished exchange only until stop's wait.
func TestStopBoundedWhenEdgeKeepsStreamOpen(t *testing.T) {
	_, st := watchedStream(t)
	w := watchCancel(st, func(error) {})
	stopWithin(t, w, 50*time.Millisecond, 10*time.Second)
}

// An Edge that keeps sending (anything but its side's close) after the
// terminal message does not hold the exchange past stop's wait either:
// a frame arriving before the deadline must not start the wait afresh.
func TestStopBoundedWhenEdgeKeepsSending(t *testing.T) {
	est, st := watchedStream(t)
	w := watchCancel(st, func(error) {})
	defer keepSending(est)()
	stopWithin(t, w, 100*time.Millisecond, 10*time.Second)
}

// A node that drains a finished exchange more slowly than the Edge sends
// on it (its frames always already buffered, which Recv hands over
// whatever the deadline) still ends the drain at stop's wait.
func TestStopBoundedWhenEdgeOutpacesTheDrain(t *testing.T) {
	drainHook = func() { time.Sleep(2 * time.Millisecond) }
	t.Cleanup(func() { drainHook = nil })
	est, st := watchedStream(t)
	w := watchCancel(st, func(error) {})
	defer keepSending(est)()
	stopWithin(t, w, 100*time.Millisecond, 5*time.Second)
}

// keepSending sends on est as fast as its window allows until the
// returned func is called, which waits for the sender to stop.
func keepSending(est *nodewire.Stream) (stop func()) {
	quit := make(chan struct{})
	sent := make(chan struct{})
	// Owner: the test; stops at quit or at the first failed send.
	go func() {
		defer close(sent)
		hb := &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{RunId: "r1"}}}
		for {
			select {
			case <-quit:
				return
			default:
			}
			if est.Send(hb) != nil {
				return
			}
		}
	}()
	return func() { close(quit); _ = est.SetWriteDeadline(time.Now()); <-sent }
}

// A reader that took a frame while stop began exits once it sees stop
// instead of re-arming: stop waits for it, and a re-armed reader would
// never close exited on a stream the Edge keeps open and quiet.
func TestReaderRacingStopExits(t *testing.T) {
	// Cleanups run last registered first. The hooks are reset last, after
	// the stream's own cleanup (registered by watchedStream below) ended
	// the stream and the reader exited: a test failing before stop would
	// otherwise reset them while a reader still reads afterRecvHook (a
	// data race), or leave that reader blocked in it for good.
	var w *cancelWatch
	t.Cleanup(func() {
		if w != nil {
			select {
			case <-w.exited:
			case <-time.After(10 * time.Second):
				t.Error("the reader did not exit at the stream's end")
			}
		}
		afterRecvHook, stopWaitsHook = nil, nil
	})
	est, st := watchedStream(t)
	stopWaiting := make(chan struct{})
	var release sync.Once
	free := func() { release.Do(func() { close(stopWaiting) }) }
	t.Cleanup(free) // first: a reader held in its hook goes on to the stream's end
	entered := make(chan struct{}, 1)
	afterRecvHook = func() {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-stopWaiting
	}
	stopWaitsHook = free
	w = watchCancel(st, func(error) {})
	if err := est.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{RunId: "r1"}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no reader started for the frame")
	}
	stopWithin(t, w, 50*time.Millisecond, 10*time.Second)
}
