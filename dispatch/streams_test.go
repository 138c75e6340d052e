package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// wireNode is node n1 played by the test over a real loopback connection.
type wireNode struct {
	h   *spyHandler
	cc  *nodewire.ClientConn
	got chan *iop.Envelope // what the handler received, in order
}

// startWireNode serves n1 with handle (nil: streams are never accepted,
// so never read and never granted window).
func startWireNode(t *testing.T, f *fixture, handle func(n *wireNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope)) *wireNode {
	t.Helper()
	h, addr := startWire(t, f)
	cc := dialNode(t, addr, "n1")
	if err := cc.Ready(context.Background(), "n1"); err != nil {
		t.Fatalf("ready: %v", err)
	}
	n := &wireNode{h: h, cc: cc, got: make(chan *iop.Envelope, 64)}
	if handle != nil {
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan struct{})
		// Owner: the test (cleanup). Stops when ctx is cancelled or the
		// connection closes; Serve waits for its handlers.
		go func() {
			defer close(served)
			_ = cc.Serve(ctx, func(hctx context.Context, st *nodewire.Stream, first *iop.Envelope) { handle(n, hctx, st, first) })
		}()
		t.Cleanup(func() { cancel(); <-served })
	}
	return n
}

func (n *wireNode) record(env *iop.Envelope) {
	select {
	case n.got <- env:
	default:
	}
}

func (n *wireNode) next(t *testing.T) *iop.Envelope {
	t.Helper()
	select {
	case env := <-n.got:
		return env
	case <-time.After(waitDeadline):
		t.Fatal("the node received nothing")
		return nil
	}
}

// silentNode reads everything and answers nothing, never half-closing.
func silentNode(n *wireNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
	n.record(first)
	for {
		env, err := st.Recv()
		if err != nil {
			break
		}
		n.record(env)
	}
	<-ctx.Done()
}

func runReq() *iop.RunRequest {
	return &iop.RunRequest{RunId: "run_1", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: &iop.RunInput{}}
}

func runEnv(typ iop.RunEventType) *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{RunId: "run_1", Type: typ}}}
}

// RecvBy gives up at its deadline without failing the exchange; Cancel
// wakes a pending Recv at once (the node need not answer) and the node
// receives the CancelRequest.
func TestRecvDeadlineAndCancelNeedNoNode(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	n := startWireNode(t, f, silentNode)
	l := mustAcquire(t, f.d, Request{Model: "m"})
	rs := mustOpenRun(t, l)
	n.next(t) // the request

	start := time.Now()
	if _, err := rs.RecvBy(time.Now().Add(100 * time.Millisecond)); !errors.Is(err, ErrRecvTimeout) {
		t.Fatalf("RecvBy past its deadline: %v, want ErrRecvTimeout", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("RecvBy returned after %s (deadline 100ms)", took)
	}

	got := make(chan error, 1)
	// Owner: this test. Stops when Recv returns (Cancel wakes it).
	go func() {
		_, err := rs.Recv()
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // let Recv block (either order must work)
	start = time.Now()
	rs.Cancel("timeout")
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Recv after Cancel: %v, want context.Canceled", err)
		}
	case <-time.After(waitDeadline):
		t.Fatal("Cancel did not wake the pending Recv")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("pending Recv returned %s after Cancel", took)
	}
	c := n.next(t).GetCancelRequest()
	if c.GetKind() != iop.CancelKind_CANCEL_KIND_CANCEL_RUN || c.GetRunId() != "run_1" || c.GetReason() != "timeout" {
		t.Errorf("cancel %v", c)
	}

	// Finish drains for the grace (the node never answers), in the
	// background, then releases the lease. The grace is a second so that
	// a Finish that waited it out (half of it allowed; it takes
	// microseconds) is told from one that returned at once on a loaded
	// machine too.
	const grace = time.Second
	start = time.Now()
	rs.Finish(l, ReasonCancelled, "timeout", grace)
	if took := time.Since(start); took > grace/2 {
		t.Errorf("Finish blocked the caller for %s (grace %v)", took, grace)
	}
	if rel, _ := l.Released(); rel {
		t.Error("lease released before the grace")
	}
	waitFor(t, "the lease back after the grace", func() bool { rel, _ := l.Released(); return rel })
	back := time.Since(start)
	if back < grace*9/10 || back > 5*grace {
		t.Errorf("lease back after %s, want about the %v grace", back, grace)
	}
	if _, why := l.Released(); why != ReasonCancelled {
		t.Errorf("released as %s", why)
	}
}

// A cancelled exchange whose node answers the cancel gives its lease back
// as soon as the terminal arrives, not after the grace.
func TestFinishReleasesAtTheTerminal(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	startWireNode(t, f, func(n *wireNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		_ = st.Send(runEnv(iop.RunEventType_RUN_EVENT_TYPE_DELTA))
		if env, err := st.Recv(); err == nil && env.GetCancelRequest() != nil {
			_ = st.Send(runEnv(iop.RunEventType_RUN_EVENT_TYPE_CANCELLED))
		}
		_ = st.CloseWrite()
	})
	l := mustAcquire(t, f.d, Request{Model: "m"})
	rs := mustOpenRun(t, l)
	if ev, err := rs.Recv(); err != nil || ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_DELTA {
		t.Fatalf("first event %v %v", ev, err)
	}
	rs.Cancel("client_disconnect")
	start := time.Now()
	rs.Finish(l, ReasonCancelled, "client_disconnect", 5*time.Second)
	waitFor(t, "the lease back", func() bool { rel, _ := l.Released(); return rel })
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("lease back %s after Finish although the node answered the cancel", took)
	}
}

// Sending a request larger than the stream window to a node that never
// reads is bounded by the context (its deadline and its cancellation) and
// by the deadline given. Each open is waited for waitDeadline at most
// (await): a send left unbounded fails the test naming the open that
// hung, not go test's timeout (the hung open is left to the fixture's
// cleanup, which closes the connection under it).
func TestOpenBoundedByContext(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	startWireNode(t, f, nil)
	big := &iop.ProviderTunnelRequest{RunId: "run_1", Method: "POST", Path: "/chat/completions", Body: []byte(strings.Repeat("x", 1<<20))}

	l := mustAcquire(t, f.d, Request{Model: "m"})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	start := time.Now()
	err := await(t, openWithin(l, ctx, time.Time{}, big), "open with a context deadline of 300ms to return (a send to a node that never reads left unbounded)")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNodeLost) {
		t.Errorf("open past the deadline: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took < 250*time.Millisecond || took > 2*time.Second {
		t.Errorf("open returned after %s (deadline 300ms)", took)
	}
	l.Release(ReasonError)

	// The same bound given as a deadline, ctx without one.
	l = mustAcquire(t, f.d, Request{Model: "m"})
	start = time.Now()
	err = await(t, openWithin(l, context.Background(), start.Add(300*time.Millisecond), big), "open with a deadline of 300ms given to return (a send to a node that never reads left unbounded)")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNodeLost) {
		t.Errorf("open past the given deadline: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took < 250*time.Millisecond || took > 2*time.Second {
		t.Errorf("open returned after %s (deadline 300ms)", took)
	}
	l.Release(ReasonError)

	l = mustAcquire(t, f.d, Request{Model: "m"})
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	err = await(t, openWithin(l, ctx, time.Time{}, big), "open with a context cancelled after 200ms to return (a send to a node that never reads left unbounded)")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("open after cancellation: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("open returned %s after the cancellation", took)
	}
	l.Release(ReasonError)
}

// A finished exchange holds no stream on the edge even when the node never
// half-closes its side.
func TestFinishedExchangeFreesStreamWithoutPeerFIN(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 4), oneNodeModels), nil)
	n := startWireNode(t, f, func(n *wireNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		_ = st.Send(runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE))
		<-ctx.Done() // never half-closes
	})
	edge := n.h.conn(0)
	base := edge.Stats().StreamsOpen // the control stream
	const runs = 3
	for i := 0; i < runs; i++ {
		l := mustAcquire(t, f.d, Request{Model: "m"})
		rs := mustOpenRun(t, l)
		if ev, err := rs.Recv(); err != nil || ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
			t.Fatalf("terminal %v %v", ev, err)
		}
		rs.Finish(l, ReasonCompleted, "", time.Second)
	}
	start := time.Now()
	deadline := time.Now().Add(20 * time.Second) // the stream linger is nodewire's
	for edge.Stats().StreamsOpen != base {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams still open on the edge %s after their exchanges finished", edge.Stats().StreamsOpen-base, time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("finished exchanges with a node that never half-closes: streams freed %s after the last one", time.Since(start).Round(time.Millisecond))
}

func TestNodeErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("%w: x", ErrUnknownNode), CodeNodeNotFound},
		{fmt.Errorf("%w: x is offline", ErrNodeNotReady), CodeNodeNotReady},
		{fmt.Errorf("dispatch: wait for node: %w", context.DeadlineExceeded), CodeTimeout},
		{ErrRecvTimeout, CodeTimeout},
		{fmt.Errorf("dispatch: send: %w", context.Canceled), CodeCancelled},
		{fmt.Errorf("%w: read tcp 10.0.0.1:7070->10.0.0.2:5555: connection reset by peer", ErrNodeLost), CodeNodeLost},
		{fmt.Errorf("%w: %w: unexpected", ErrNodeLost, nodewire.ErrProtocol), CodeProtocol},
		{errors.Join(fmt.Errorf("%w: x", ErrNodeLost)), CodeNodeLost},
		{errors.New("something else"), CodeNodeError},
	} {
		if got := NodeErrorCode(tc.err); got != tc.want {
			t.Errorf("NodeErrorCode(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
