package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// ErrStreamEnded is returned by Recv after the terminal event or frame.
var ErrStreamEnded = errors.New("dispatch: stream ended")

// ErrRecvTimeout is returned by RecvBy when its deadline passed before the
// next event or frame arrived. The exchange is still open: the caller
// decides (cancel, answer the client) without waiting for the node.
var ErrRecvTimeout = errors.New("dispatch: no answer from the node before the deadline")

// ErrCallerDone is returned by RecvBy once the channel given to SetDone
// has closed (the edge's client went away). The exchange is still open:
// the caller cancels it with its reason.
var ErrCallerDone = errors.New("dispatch: caller done")

// cancelSendTimeout bounds sending a CancelRequest: a node that does not
// read its stream must not hold the canceller.
const cancelSendTimeout = time.Second

// exchange is one Edge-opened stream carrying a run or a tunnel.
//
// Read deadlines are how the edge stops waiting on a node that does not
// answer: Recv sets the caller's deadline, Cancel moves it to now (the
// pending Recv returns at once, whatever the node does) and Drain sets its
// grace. They are set under mu so that a later one never loses to an
// earlier one: after Cancel no Recv extends the deadline, and once Drain
// owns it nothing moves it but a failed cancel.
type exchange struct {
	st    *nodewire.Stream
	runID string
	// lease is the lease the exchange runs on: the terminal's arrival is
	// recorded on it (Lease.settled).
	lease *Lease
	// tunnel is set when the exchange carries a tunnel (its frames are
	// tunnel frames), not a run; never changed.
	tunnel bool
	mu     sync.Mutex
	// done is guarded by mu: terminal seen, drained or closed.
	done bool
	// cancel is guarded by mu: Cancel ran (a CancelRequest was or is being
	// sent).
	cancel bool
	// cancelFailed is guarded by mu: the CancelRequest could not be sent,
	// so no terminal message will answer it.
	cancelFailed bool
	// draining is guarded by mu: Drain owns the read deadline.
	draining bool
	// closed is guarded by mu: Close ran.
	closed bool
	// rdl is guarded by mu: the read deadline recv last set.
	rdl time.Time
}

// maxRecvSlack bounds how much later than asked a recv deadline may pass
// (see setRecvDeadlineLocked).
const maxRecvSlack = 250 * time.Millisecond

// openStream opens the exchange of a Stream on l (see OpenTunnel). The
// exchange lives in the Stream: one allocation per request, not two.
func openStream[T streamItem](ctx context.Context, deadline time.Time, l *Lease, runID string, first *iop.Envelope) (*Stream[T], error) {
	d := l.d
	// Whatever an earlier exchange on the lease settled does not describe
	// this one, even one that fails to open.
	l.settled.Store(settledNone)
	l.exch.Store(nil)
	d.mu.Lock()
	released, conn := l.released, l.conn
	d.mu.Unlock()
	if released {
		return nil, ErrLeaseReleased
	}
	if conn == nil {
		return nil, ErrNodeLost
	}
	st, err := conn.OpenStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNodeLost, err)
	}
	// A request body larger than the stream window waits for the node to
	// grant credit; a node that never reads would hold it forever. The
	// send is bounded by the deadline (the caller's response timeout; a
	// deadline rather than a derived context, which would cost a timer and
	// two cancellation hooks per request) and by ctx's cancellation (the
	// client went away), which the send's waits observe (SetDone): a
	// context.AfterFunc here would leave ctx a children map for as long as
	// the exchange is held, though stopped at once.
	deadline = earliest(deadline, ctx)
	if !deadline.IsZero() {
		_ = st.SetWriteDeadline(deadline)
	}
	done := ctx.Done()
	if done != nil {
		st.SetDone(done)
	}
	err = st.Send(first)
	if done != nil {
		st.SetDone(nil)
	}
	if err != nil {
		st.Abort()
		if errors.Is(err, nodewire.ErrEncode) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		if cerr := ctxErr(ctx, deadline, err); cerr != nil {
			return nil, fmt.Errorf("dispatch: send request: %w", cerr)
		}
		return nil, fmt.Errorf("%w: send request: %w", ErrNodeLost, err)
	}
	// Cancel sets its own write deadline; this one must not cut it short.
	_ = st.SetWriteDeadline(time.Time{})
	// The Edge sends nothing more than an optional CancelRequest, so the
	// write side stays open for it; the Node closes its side after the
	// terminal message.
	s := &Stream[T]{x: exchange{st: st, runID: runID, lease: l, tunnel: first.GetProviderTunnelRequest() != nil}}
	l.exch.Store(&s.x)
	return s, nil
}

// queuedTerminal is the Lease.settled value of the first terminal among
// the frames that have arrived on the exchange and that its holder has not
// read, settledNone when there is none (or the holder is reading just
// now: nodewire.Stream.FirstQueued does not wait for it). A node that sent
// more after its terminal (broken, or hostile) has still ended its work
// there: the holder reads up to the terminal and no further. A frame
// before it that the holder's read refuses (not of the exchange's kind,
// or one nodewire refuses) ends the walk with none: the holder fails
// there. walk is how many frames from the first are decoded before only
// the last is looked at (nodewire.Stream.FirstQueuedWithin).
func (x *exchange) queuedTerminal(walk int) uint32 {
	settled := settledNone
	x.st.FirstQueuedWithin(func(env *iop.Envelope) bool {
		if x.tunnel {
			f, ok := tunnelFrame(env)
			if !ok {
				return true
			}
			settled = tunnelTerminal(f)
		} else {
			ev, ok := runEvent(env)
			if !ok {
				return true
			}
			settled = runTerminal(ev)
		}
		return settled != settledNone
	}, walk)
	return settled
}

// earliest is the earlier of deadline and ctx's deadline (zero: neither
// has one).
func earliest(deadline time.Time, ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok && (deadline.IsZero() || dl.Before(deadline)) {
		return dl
	}
	return deadline
}

// ctxErr is ctx's error when err is (or was caused by) ctx ending, and
// context.DeadlineExceeded when it was caused by deadline (zero: none)
// passing: the stream deadline can pass a moment before ctx's own timer
// marks it done.
func ctxErr(ctx context.Context, deadline time.Time, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if !deadline.IsZero() && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// recv reads the next envelope, waiting until deadline at most (zero: no
// bound).
func (x *exchange) recv(deadline time.Time) (*iop.Envelope, error) {
	x.mu.Lock()
	if !x.cancel && !x.draining {
		x.setRecvDeadlineLocked(deadline)
	}
	x.mu.Unlock()
	env, err := x.st.RecvLent() // see RecvBy: a BODY frame is lent
	if err != nil {
		x.mu.Lock()
		cancelled := x.cancel
		x.mu.Unlock()
		if cancelled {
			return nil, context.Canceled
		}
		if errors.Is(err, nodewire.ErrDone) {
			return nil, ErrCallerDone
		}
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: stream closed before its terminal message", ErrNodeLost)
		}
		if !deadline.IsZero() && (errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(deadline)) {
			return nil, ErrRecvTimeout
		}
		return nil, fmt.Errorf("%w: %w", ErrNodeLost, err)
	}
	return env, nil
}

// setRecvDeadlineLocked makes deadline the stream's read deadline, or a
// moment later: a deadline that moves with every frame (an idle timeout)
// is pushed a sixteenth of its window further (at most maxRecvSlack), so
// that a fast stream moves it (a lock, a wake-up of the reader) a few
// times a second instead of once per frame. x.mu must be held.
func (x *exchange) setRecvDeadlineLocked(deadline time.Time) {
	if deadline.IsZero() {
		if !x.rdl.IsZero() {
			x.rdl = time.Time{}
			_ = x.st.SetReadDeadline(time.Time{})
		}
		return
	}
	slack := max(min(time.Until(deadline)/16, maxRecvSlack), 0)
	if x.rdl.IsZero() || x.rdl.Before(deadline) || x.rdl.After(deadline.Add(slack)) {
		x.rdl = deadline.Add(slack)
		_ = x.st.SetReadDeadline(x.rdl)
	}
}

// Cancel sends CancelRequest(CANCEL_RUN) for the exchange's run. reason is
// one of client_disconnect, timeout, write_error, admin. A Recv pending in
// another goroutine returns at once (context.Canceled): the caller ends
// its request now, not when the node answers. The stream stays readable
// so that Drain can wait (bounded) for the Node's terminal message, which
// arrives once the Node has stopped the run and freed its slot. Safe to
// call more than once and after completion (then a no-op), and
// concurrently with Recv.
func (x *exchange) Cancel(reason string) {
	x.mu.Lock()
	if x.done || x.cancel {
		x.mu.Unlock()
		return
	}
	x.cancel = true
	if !x.draining {
		_ = x.st.SetReadDeadline(time.Now())
	}
	x.mu.Unlock()
	// The caller's done channel (SetDone) has likely closed (a client
	// gone): the cancellation must still go out, and Drain still read.
	x.st.SetDone(nil)
	_ = x.st.SetWriteDeadline(time.Now().Add(cancelSendTimeout))
	err := x.st.Send(&iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{
		Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: x.runID, Reason: reason,
	}}})
	if err != nil {
		// No terminal will answer a cancel the node never got: a drain
		// need not wait for one.
		x.mu.Lock()
		x.cancelFailed = true
		if x.draining {
			_ = x.st.SetReadDeadline(time.Now())
		}
		x.mu.Unlock()
	}
}

// Drain reads and discards until the terminal message, the end of the
// stream, or timeout, whichever comes first, and reports whether the
// terminal came (terminal says how an envelope ends the exchange, as
// Stream.terminal does; 0: it does not). Callers use it after Cancel so
// the lease is released only once the Node has let go of the run.
func (x *exchange) Drain(timeout time.Duration, terminal func(*iop.Envelope) uint32) (ended bool) {
	x.mu.Lock()
	if x.done {
		x.mu.Unlock()
		return false
	}
	x.draining = true
	failed := x.cancelFailed
	_ = x.st.SetReadDeadline(time.Now().Add(timeout))
	x.mu.Unlock()
	x.st.SetDone(nil) // see Cancel

	for !failed {
		env, err := x.st.RecvLent()
		if err != nil {
			break
		}
		if k := terminal(env); k != settledNone {
			x.lease.settled.Store(k)
			ended = true
			break
		}
	}
	x.markDone()
	return ended
}

// Close releases the stream. After the terminal message as before it, it
// aborts the stream: half-close, discard what the node still sends, reset
// after a short linger. A node that never half-closes its side of a
// finished exchange therefore holds no stream (nor its buffers) on the
// edge. Idempotent.
func (x *exchange) Close() {
	x.mu.Lock()
	closed := x.closed
	x.closed, x.done = true, true
	x.mu.Unlock()
	if !closed {
		x.st.Abort()
	}
}

func (x *exchange) markDone() {
	x.mu.Lock()
	x.done = true
	x.mu.Unlock()
}

// streamItem is what a Stream carries: a run's events or a tunnel's
// frames.
type streamItem interface {
	*iop.RunEvent | *iop.ProviderTunnelFrame
}

// Stream is the Edge side of one exchange: a normalized run (events) or a
// provider tunnel (frames). The exchange is held by value: a held stream
// costs one object, not the exchange and a handle to it (24 B more per
// stream, and an allocation per request).
type Stream[T streamItem] struct {
	x exchange
}

// unwrap is the envelope's event or frame; false when it carries none
// (x.tunnel, set from the request the exchange opened with, says which
// of the two T is).
func (s *Stream[T]) unwrap(env *iop.Envelope) (T, bool) {
	var v any
	if s.x.tunnel {
		f, ok := tunnelFrame(env)
		if !ok {
			return nil, false
		}
		v = f
	} else {
		ev, ok := runEvent(env)
		if !ok {
			return nil, false
		}
		v = ev
	}
	return v.(T), true
}

// terminal is how an event or frame ends the exchange: the Lease.settled
// value of its reason, or settledNone for one that does not end it.
func (s *Stream[T]) terminal(v T) uint32 {
	switch v := any(v).(type) {
	case *iop.RunEvent:
		return runTerminal(v)
	case *iop.ProviderTunnelFrame:
		return tunnelTerminal(v)
	}
	return settledNone
}

// RunStream carries a run's events.
type RunStream = Stream[*iop.RunEvent]

// TunnelStream carries a tunnel's frames.
type TunnelStream = Stream[*iop.ProviderTunnelFrame]

func runEvent(env *iop.Envelope) (*iop.RunEvent, bool) {
	ev := env.GetRunEvent()
	return ev, ev != nil
}

// runTerminal: complete ends a run as completed, error as error,
// cancelled as cancelled.
func runTerminal(ev *iop.RunEvent) uint32 {
	switch ev.GetType() {
	case iop.RunEventType_RUN_EVENT_TYPE_COMPLETE:
		return settledCompleted
	case iop.RunEventType_RUN_EVENT_TYPE_ERROR:
		return settledError
	case iop.RunEventType_RUN_EVENT_TYPE_CANCELLED:
		return settledCancelled
	}
	return settledNone
}

func tunnelFrame(env *iop.Envelope) (*iop.ProviderTunnelFrame, bool) {
	f := env.GetProviderTunnelFrame()
	return f, f != nil
}

// tunnelTerminal: END ends a tunnel as completed, ERROR as error (as
// cancelled when its code says the node cancelled it). A frame with the
// legacy end flag and no kind ends it as END does, or as ERROR does when
// it carries an error.
func tunnelTerminal(f *iop.ProviderTunnelFrame) uint32 {
	switch kind := f.GetKind(); {
	case kind == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, f.GetEnd() && kind != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END && f.GetError() != nil:
		if f.GetError().GetCode() == iop.ErrorCode_ERROR_CODE_CANCELLED {
			return settledCancelled
		}
		return settledError
	case kind == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, f.GetEnd():
		return settledCompleted
	}
	return settledNone
}

// OpenRun sends req on the lease's node and returns its event stream.
// Sending is bounded as in OpenTunnel.
func (l *Lease) OpenRun(ctx context.Context, deadline time.Time, req *iop.RunRequest) (*RunStream, error) {
	req.Adapter, req.Target = l.ProviderID, l.Target
	return openStream[*iop.RunEvent](ctx, deadline, l, req.GetRunId(), &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: req}})
}

// OpenTunnel sends req on the lease's node and returns its frame stream.
// Sending is bounded by deadline (zero: none), by ctx's deadline and by
// ctx's cancellation: when one of them ends it first, the stream is
// aborted and the error wraps context.DeadlineExceeded or
// context.Canceled instead of ErrNodeLost.
func (l *Lease) OpenTunnel(ctx context.Context, deadline time.Time, req *iop.ProviderTunnelRequest) (*TunnelStream, error) {
	req.Adapter, req.Target = l.ProviderID, l.Target
	return openStream[*iop.ProviderTunnelFrame](ctx, deadline, l, req.GetRunId(), &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: req}})
}

// Recv returns the next event or frame, waiting as long as it takes. See
// RecvBy.
func (s *Stream[T]) Recv() (T, error) { return s.RecvBy(time.Time{}) }

// RecvBy returns the next event or frame, or ErrRecvTimeout once deadline
// (zero: none) has passed without one. After the terminal one (run:
// complete, error, cancelled; tunnel: END or ERROR) it returns
// ErrStreamEnded. A lost node yields ErrNodeLost; after Cancel, a failed
// read is context.Canceled.
//
// A tunnel's BODY frame, and its body, are valid only until the next
// RecvBy (nodewire.Stream.RecvLent: a streamed chunk then costs no
// allocation); the caller copies what it keeps. So is a run's DELTA
// event, the struct itself: its fields' values (strings, usage, error,
// metadata) are the caller's to keep. Every other frame and every other
// run event is the caller's.
func (s *Stream[T]) RecvBy(deadline time.Time) (T, error) {
	var zero T
	s.x.mu.Lock()
	done := s.x.done
	s.x.mu.Unlock()
	if done {
		return zero, ErrStreamEnded
	}
	env, err := s.x.recv(deadline)
	if err != nil {
		return zero, err
	}
	v, ok := s.unwrap(env)
	if !ok {
		return zero, fmt.Errorf("%w: %w: unexpected %T", ErrNodeLost, nodewire.ErrProtocol, env.Body)
	}
	if k := s.terminal(v); k != settledNone {
		// The node's work is over: a fence from here on (a drained node
		// stopping before the holder's Finish) returns the lease with
		// the terminal's reason, not node_lost.
		s.x.lease.settled.Store(k)
		s.x.markDone()
	}
	return v, nil
}

// SetDone makes RecvBy fail with ErrCallerDone once done closes (nil:
// never, the default), before it returns another event or frame, however
// many have arrived: how the edge stops relaying when its client goes
// away (done: the request context's Done), observed by the wait RecvBy
// makes anyway instead of a registration on the context. Cancel and Drain
// clear it, so that the cancellation still goes out and the drain still
// reads. A RecvBy already waiting sees a new channel at its next wake-up.
func (s *Stream[T]) SetDone(done <-chan struct{}) { s.x.st.SetDone(done) }

// Ready reports whether the next event or frame has already arrived, so
// that RecvBy returns it without waiting on the node
// (nodewire.Stream.FrameReady). A relay flushes what it wrote to its
// client only when it is false: a backlog then leaves in one write. It
// must not be called concurrently with RecvBy.
func (s *Stream[T]) Ready() bool { return s.x.st.FrameReady() }

// Cancel aborts the exchange upstream (CancelRequest CANCEL_RUN); a
// pending Recv returns at once.
func (s *Stream[T]) Cancel(reason string) { s.x.Cancel(reason) }

// Drain waits (bounded) for the terminal message after a Cancel and
// reports whether it came.
func (s *Stream[T]) Drain(timeout time.Duration) bool {
	return s.x.Drain(timeout, func(env *iop.Envelope) uint32 {
		if v, ok := s.unwrap(env); ok {
			return s.terminal(v)
		}
		return settledNone
	})
}

// Close frees the stream. Idempotent.
func (s *Stream[T]) Close() { s.x.Close() }

// afterFinishClose, set only by tests (nil in production), runs in Finish
// between closing an exchange (finished, or drained in the background)
// and releasing its lease: the moment in which the node may act on the
// close.
var afterFinishClose func(l *Lease)

// CancelAbandoned is the CancelRequest reason of an exchange the Edge
// gave up before its end without a caller's cancellation (a failover, an
// answer it refused to relay).
const CancelAbandoned = "abandoned"

// Finish ends the exchange and releases its lease l with reason.
// cancelled is why the caller cancelled the exchange ("" if it did not).
//
// An exchange that ends before its terminal message — cancelled, or
// abandoned by the caller (then cancelled here as CancelAbandoned) — is
// drained first, for grace at most, so that the lease goes back only once
// the Node has stopped the run and freed its own capacity slot (the next
// waiter handed that slot would otherwise be refused by the Node's gate).
// That drain runs in the background: the caller (an HTTP handler that has
// written its answer) returns at once, and a Node that never answers costs
// the lease grace, no more. After the terminal the stream is closed and
// the lease released before Finish returns.
func (s *Stream[T]) Finish(l *Lease, reason ReleaseReason, cancelled string, grace time.Duration) {
	x := &s.x
	x.mu.Lock()
	pending := !x.done
	x.mu.Unlock()
	if !pending {
		// Settled before the close: a draining node whose last work
		// this was may already be stopping, and its fence may come
		// before the Release below.
		l.settle(reason)
		x.Close()
		if afterFinishClose != nil {
			afterFinishClose(l)
		}
		l.Release(reason)
		return
	}
	if cancelled == "" {
		cancelled = CancelAbandoned
	}
	// Owner: the lease's holder hands the lease to this goroutine. Stops
	// after grace at the latest: Drain's read deadline bounds it, Cancel's
	// send is bounded by cancelSendTimeout.
	go func() {
		// Usually a no-op for a cancellation: whoever recorded it sent
		// it (this covers the moment between recording and sending); an
		// abandoned exchange is cancelled here.
		x.Cancel(cancelled)
		if s.Drain(grace) {
			l.settle(reason)
		}
		x.Close()
		if afterFinishClose != nil {
			afterFinishClose(l)
		}
		l.Release(reason)
	}()
}

// requestOn performs a one-shot exchange with one session of a node:
// send req, read one response envelope, both bounded by ctx.
func requestOn(ctx context.Context, conn *nodewire.Conn, req *iop.Envelope) (*iop.Envelope, error) {
	st, err := conn.OpenStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNodeLost, err)
	}
	defer st.Abort()
	deadline := earliest(time.Time{}, ctx)
	if !deadline.IsZero() {
		_ = st.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = st.SetDeadline(time.Now()) })
	defer stop()
	if err := st.Send(req); err != nil {
		if cerr := ctxErr(ctx, deadline, err); cerr != nil {
			return nil, fmt.Errorf("dispatch: send to node: %w", cerr)
		}
		return nil, fmt.Errorf("%w: %w", ErrNodeLost, err)
	}
	env, err := st.Recv()
	if err != nil {
		if cerr := ctxErr(ctx, deadline, err); cerr != nil {
			return nil, fmt.Errorf("dispatch: wait for node: %w", cerr)
		}
		return nil, fmt.Errorf("%w: %w", ErrNodeLost, err)
	}
	return env, nil
}

// Error codes for a failed node operation (NodeErrorCode). They are what
// the admin API shows: fixed words, never transport text, addresses or OS
// errors.
const (
	CodeNodeNotFound = "node_not_found"
	CodeNodeNotReady = "node_not_ready"
	CodeNodeLost     = "node_lost"
	CodeTimeout      = "timeout"
	CodeCancelled    = "cancelled"
	CodeProtocol     = "protocol_error"
	CodeNodeError    = "node_error"
)

// NodeErrorCode classifies an error of NodeCommand, RefreshNode,
// TerminateSession or a stream as one of the Code* constants, for answers
// that must not carry the error's own text (which can name addresses,
// ports and OS errors).
func NodeErrorCode(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrUnknownNode):
		return CodeNodeNotFound
	case errors.Is(err, ErrNodeNotReady):
		return CodeNodeNotReady
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrRecvTimeout):
		return CodeTimeout
	case errors.Is(err, context.Canceled):
		return CodeCancelled
	case errors.Is(err, nodewire.ErrProtocol):
		return CodeProtocol
	case errors.Is(err, ErrNodeLost), errors.Is(err, nodewire.ErrClosed):
		return CodeNodeLost
	default:
		return CodeNodeError
	}
}

// NodeCommand runs a query command (usage, capabilities, sessions,
// transport, providers) on a ready node.
func (d *Dispatcher) NodeCommand(ctx context.Context, nodeID, typ string) (*iop.NodeCommandResponse, error) {
	conn, err := d.nodeConn(nodeID)
	if err != nil {
		return nil, err
	}
	return nodeCommandOn(ctx, conn, typ)
}

// nodeCommandOn is NodeCommand on one session of the node.
func nodeCommandOn(ctx context.Context, conn *nodewire.Conn, typ string) (*iop.NodeCommandResponse, error) {
	env, err := requestOn(ctx, conn, &iop.Envelope{Body: &iop.Envelope_NodeCommandRequest{NodeCommandRequest: &iop.NodeCommandRequest{Type: typ}}})
	if err != nil {
		return nil, err
	}
	resp := env.GetNodeCommandResponse()
	if resp == nil {
		return nil, fmt.Errorf("%w: want NodeCommandResponse, got %T", nodewire.ErrProtocol, env.Body)
	}
	return resp, nil
}

// terminateSendTimeout bounds sending TERMINATE_SESSION to one node.
const terminateSendTimeout = 5 * time.Second

// TerminateSession sends CancelRequest(TERMINATE_SESSION) to every ready
// node (a session's processes live on whichever node served it) and reports
// how many nodes it reached. The nodes are asked at once, each send bounded
// by terminateSendTimeout and by ctx: a node that stopped reading holds
// neither the others nor the caller past ctx.
func (d *Dispatcher) TerminateSession(ctx context.Context, sessionID string) (int, error) {
	d.mu.Lock()
	var conns []*nodewire.Conn
	for _, n := range d.nodes {
		if n.state == stateReady {
			conns = append(conns, n.owner)
		}
	}
	d.mu.Unlock()
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		// Owner: this call, which waits for it; ends when the send does,
		// bounded by terminateSendTimeout and ctx.
		go func() {
			defer wg.Done()
			errs[i] = terminateOn(ctx, c, sessionID)
		}()
	}
	wg.Wait()
	reached := 0
	for _, err := range errs {
		if err == nil {
			reached++
		}
	}
	return reached, errors.Join(errs...)
}

// terminateOn sends TERMINATE_SESSION for sessionID on one node's session.
func terminateOn(ctx context.Context, c *nodewire.Conn, sessionID string) error {
	st, err := c.OpenStream(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNodeLost, err)
	}
	defer st.Abort()
	ctxDeadline := earliest(time.Time{}, ctx)
	_ = st.SetWriteDeadline(earliest(time.Now().Add(terminateSendTimeout), ctx))
	stop := context.AfterFunc(ctx, func() { _ = st.SetWriteDeadline(time.Now()) })
	defer stop()
	err = st.Send(&iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{
		Kind: iop.CancelKind_CANCEL_KIND_TERMINATE_SESSION, SessionId: sessionID, Reason: "admin",
	}}})
	if err != nil {
		if cerr := ctxErr(ctx, ctxDeadline, err); cerr != nil {
			return fmt.Errorf("dispatch: send terminate: %w", cerr)
		}
		return fmt.Errorf("%w: %w", ErrNodeLost, err)
	}
	return nil
}
