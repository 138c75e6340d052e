package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// ErrStreamEnded is returned by Recv after the terminal event or frame.
var ErrStreamEnded = errors.New("dispatch: stream ended")

// exchange is one Edge-opened stream carrying a run or a tunnel.
type exchange struct {
	st     *nodewire.Stream
	runID  string
	mu     sync.Mutex
	done   bool // guarded by mu: terminal seen, cancelled or closed
	cancel bool // guarded by mu: a CancelRequest was sent
}

func (d *Dispatcher) openExchange(ctx context.Context, l *Lease, runID string, first *iop.Envelope) (*exchange, error) {
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
	if err := st.Send(first); err != nil {
		st.Abort()
		if errors.Is(err, nodewire.ErrEncode) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		return nil, fmt.Errorf("%w: send request: %w", ErrNodeLost, err)
	}
	// The Edge sends nothing more than an optional CancelRequest, so the
	// write side stays open for it; the Node closes its side after the
	// terminal message.
	return &exchange{st: st, runID: runID}, nil
}

func (x *exchange) recv() (*iop.Envelope, error) {
	env, err := x.st.Recv()
	if err != nil {
		x.mu.Lock()
		cancelled := x.cancel
		x.mu.Unlock()
		if cancelled {
			return nil, context.Canceled
		}
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: stream closed before its terminal message", ErrNodeLost)
		}
		return nil, fmt.Errorf("%w: %w", ErrNodeLost, err)
	}
	return env, nil
}

// Cancel sends CancelRequest(CANCEL_RUN) for the exchange's run. reason is
// one of client_disconnect, timeout, write_error, admin. The stream stays
// readable so the caller can Drain the Node's terminal message (which
// arrives once the Node has stopped the run and freed its slot) before it
// releases the lease. Safe to call more than once and after completion
// (then a no-op), and concurrently with Recv.
func (x *exchange) Cancel(reason string) {
	x.mu.Lock()
	if x.done || x.cancel {
		x.mu.Unlock()
		return
	}
	x.cancel = true
	x.mu.Unlock()
	_ = x.st.SetWriteDeadline(time.Now().Add(time.Second))
	if err := x.st.Send(&iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{
		Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: x.runID, Reason: reason,
	}}}); err != nil {
		// The stream is unusable; unblock any reader.
		_ = x.st.SetReadDeadline(time.Now())
	}
}

// Drain reads and discards until the terminal message, the end of the
// stream, or timeout, whichever comes first. Callers use it after Cancel so
// the lease is released only once the Node has let go of the run.
func (x *exchange) Drain(timeout time.Duration, terminal func(*iop.Envelope) bool) {
	x.mu.Lock()
	done := x.done
	x.mu.Unlock()
	if done {
		return
	}
	_ = x.st.SetReadDeadline(time.Now().Add(timeout))
	for {
		env, err := x.st.Recv()
		if err != nil || terminal(env) {
			break
		}
	}
	x.markDone()
	_ = x.st.CloseWrite()
}

// Close releases the stream after the terminal message, or aborts it
// (without a CancelRequest) before. Idempotent.
func (x *exchange) Close() {
	x.mu.Lock()
	wasDone := x.done
	x.done = true
	x.mu.Unlock()
	if !wasDone {
		x.st.Abort()
		return
	}
	_ = x.st.CloseWrite()
}

func (x *exchange) markDone() {
	x.mu.Lock()
	x.done = true
	x.mu.Unlock()
}

// Stream is the Edge side of one exchange: a normalized run (events) or a
// provider tunnel (frames).
type Stream[T any] struct {
	x        *exchange
	unwrap   func(*iop.Envelope) (T, bool)
	terminal func(T) bool
}

// RunStream carries a run's events.
type RunStream = Stream[*iop.RunEvent]

// TunnelStream carries a tunnel's frames.
type TunnelStream = Stream[*iop.ProviderTunnelFrame]

func runEvent(env *iop.Envelope) (*iop.RunEvent, bool) {
	ev := env.GetRunEvent()
	return ev, ev != nil
}

func runTerminal(ev *iop.RunEvent) bool {
	switch ev.GetType() {
	case iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, iop.RunEventType_RUN_EVENT_TYPE_ERROR, iop.RunEventType_RUN_EVENT_TYPE_CANCELLED:
		return true
	}
	return false
}

func tunnelFrame(env *iop.Envelope) (*iop.ProviderTunnelFrame, bool) {
	f := env.GetProviderTunnelFrame()
	return f, f != nil
}

func tunnelTerminal(f *iop.ProviderTunnelFrame) bool {
	return f.GetEnd() || f.GetKind() == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END || f.GetKind() == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR
}

// OpenRun sends req on the lease's node and returns its event stream.
func (l *Lease) OpenRun(ctx context.Context, req *iop.RunRequest) (*RunStream, error) {
	req.Adapter, req.Target = l.ProviderID, l.Target
	x, err := l.d.openExchange(ctx, l, req.GetRunId(), &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: req}})
	if err != nil {
		return nil, err
	}
	return &RunStream{x: x, unwrap: runEvent, terminal: runTerminal}, nil
}

// OpenTunnel sends req on the lease's node and returns its frame stream.
func (l *Lease) OpenTunnel(ctx context.Context, req *iop.ProviderTunnelRequest) (*TunnelStream, error) {
	req.Adapter, req.Target = l.ProviderID, l.Target
	x, err := l.d.openExchange(ctx, l, req.GetRunId(), &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: req}})
	if err != nil {
		return nil, err
	}
	return &TunnelStream{x: x, unwrap: tunnelFrame, terminal: tunnelTerminal}, nil
}

// Recv returns the next event or frame. After the terminal one (run:
// complete, error, cancelled; tunnel: END or ERROR) it returns
// ErrStreamEnded. A lost node yields ErrNodeLost.
func (s *Stream[T]) Recv() (T, error) {
	var zero T
	s.x.mu.Lock()
	done := s.x.done
	s.x.mu.Unlock()
	if done {
		return zero, ErrStreamEnded
	}
	env, err := s.x.recv()
	if err != nil {
		return zero, err
	}
	v, ok := s.unwrap(env)
	if !ok {
		return zero, fmt.Errorf("%w: %w: unexpected %T", ErrNodeLost, nodewire.ErrProtocol, env.Body)
	}
	if s.terminal(v) {
		s.x.markDone()
	}
	return v, nil
}

// Cancel aborts the exchange upstream (CancelRequest CANCEL_RUN).
func (s *Stream[T]) Cancel(reason string) { s.x.Cancel(reason) }

// Drain waits (bounded) for the terminal message after a Cancel.
func (s *Stream[T]) Drain(timeout time.Duration) {
	s.x.Drain(timeout, func(env *iop.Envelope) bool {
		v, ok := s.unwrap(env)
		return ok && s.terminal(v)
	})
}

// Close frees the stream. Idempotent.
func (s *Stream[T]) Close() { s.x.Close() }

// request performs a one-shot exchange with a ready node: send req, read
// one response envelope.
func (d *Dispatcher) request(ctx context.Context, nodeID string, req *iop.Envelope) (*iop.Envelope, error) {
	conn, err := d.nodeConn(nodeID)
	if err != nil {
		return nil, err
	}
	st, err := conn.OpenStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNodeLost, err)
	}
	defer st.Abort()
	if dl, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = st.SetDeadline(time.Now()) })
	defer stop()
	if err := st.Send(req); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNodeLost, err)
	}
	env, err := st.Recv()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %w", ErrNodeLost, err)
	}
	return env, nil
}

// NodeCommand runs a query command (usage, capabilities, sessions,
// transport, providers) on a ready node.
func (d *Dispatcher) NodeCommand(ctx context.Context, nodeID, typ string) (*iop.NodeCommandResponse, error) {
	env, err := d.request(ctx, nodeID, &iop.Envelope{Body: &iop.Envelope_NodeCommandRequest{NodeCommandRequest: &iop.NodeCommandRequest{Type: typ}}})
	if err != nil {
		return nil, err
	}
	resp := env.GetNodeCommandResponse()
	if resp == nil {
		return nil, fmt.Errorf("%w: want NodeCommandResponse, got %T", nodewire.ErrProtocol, env.Body)
	}
	return resp, nil
}

// TerminateSession sends CancelRequest(TERMINATE_SESSION) to every ready
// node (a session's processes live on whichever node served it) and reports
// how many nodes it reached.
func (d *Dispatcher) TerminateSession(ctx context.Context, sessionID string) (int, error) {
	d.mu.Lock()
	var conns []*nodewire.Conn
	for _, n := range d.nodes {
		if n.state == stateReady {
			conns = append(conns, n.owner)
		}
	}
	d.mu.Unlock()
	reached := 0
	var errs []error
	for _, c := range conns {
		st, err := c.OpenStream(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_ = st.SetWriteDeadline(time.Now().Add(5 * time.Second))
		err = st.Send(&iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{
			Kind: iop.CancelKind_CANCEL_KIND_TERMINATE_SESSION, SessionId: sessionID, Reason: "admin",
		}}})
		st.Abort()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		reached++
	}
	return reached, errors.Join(errs...)
}
