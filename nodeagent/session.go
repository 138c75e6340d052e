package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
	"github.com/iop-gateway/iop/tracing"
)

// afterTerminalWait bounds how long a finished exchange waits for the Edge
// to close its side before the stream is dropped.
const afterTerminalWait = 30 * time.Second

// cancelSendGrace bounds every send of a run or tunnel whose context has
// ended (cancelled, timed out, session lost): an Edge that does not read
// the stream cannot hold the adapter, and with it the slot, past this.
const cancelSendGrace = 5 * time.Second

// HandleStream serves one Edge-opened stream (a nodewire.StreamHandler).
func (a *Agent) HandleStream(ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
	switch body := first.Body.(type) {
	case *iop.Envelope_RunRequest:
		a.serveRun(ctx, st, body.RunRequest)
	case *iop.Envelope_ProviderTunnelRequest:
		a.serveTunnel(ctx, st, body.ProviderTunnelRequest)
	case *iop.Envelope_CancelRequest:
		a.serveCancel(body.CancelRequest)
		_ = st.CloseWrite()
	case *iop.Envelope_NodeCommandRequest:
		resp := a.Command(ctx, body.NodeCommandRequest.GetType())
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_NodeCommandResponse{NodeCommandResponse: resp}})
		_ = st.CloseWrite()
	case *iop.Envelope_NodeConfigRefreshRequest:
		status, err := a.Apply(body.NodeConfigRefreshRequest.GetConfig(), false)
		resp := &iop.NodeConfigRefreshResponse{Status: status}
		if status == iop.RefreshStatus_REFRESH_STATUS_APPLIED {
			resp.Adapters = a.Capabilities()
		}
		if err != nil {
			resp.Reason = err.Error()
			a.log.Warn("config refresh not applied", zap.Stringer("status", status), zap.Error(err))
		}
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_NodeConfigRefreshResponse{NodeConfigRefreshResponse: resp}})
		_ = st.CloseWrite()
	default:
		a.log.Warn("unexpected stream opener", zap.String("type", fmt.Sprintf("%T", first.Body)))
		st.Abort()
		return
	}
	a.finish(st)
}

// finish waits (bounded) for the Edge to close its side, then drops the
// stream.
func (a *Agent) finish(st *nodewire.Stream) {
	_ = st.CloseWrite()
	st.Abort()
}

func (a *Agent) serveCancel(req *iop.CancelRequest) {
	switch req.GetKind() {
	case iop.CancelKind_CANCEL_KIND_CANCEL_RUN:
		a.cancelRun(req.GetRunId())
	case iop.CancelKind_CANCEL_KIND_TERMINATE_SESSION:
		for _, in := range a.snapshotInstances() {
			if sm, ok := in.impl.(adapter.SessionManager); ok {
				if _, err := query(a.log, in.name, func() (struct{}, error) { return struct{}{}, sm.TerminateSession(req.GetSessionId()) }); err != nil {
					a.log.Warn("terminate session failed", zap.String("adapter", in.name), zap.Error(err))
				}
			}
		}
	}
}

// errRunIDInUse refuses a run or tunnel that names the id of one still
// running on this node. CANCEL_RUN finds a run by id alone: letting the
// newcomer take the id over would put the first beyond a cancel by id, and
// whichever ended first would drop the other's entry. Edges draw a fresh
// random id for every attempt, so only a broken edge meets this.
var errRunIDInUse = errors.New("nodeagent: run id already in use on this node")

// claimRun makes cancel what CANCEL_RUN with id calls, unless a run still
// holds id. An empty id is not tracked (nothing can cancel it by id).
func (a *Agent) claimRun(id string, cancel context.CancelCauseFunc) bool {
	if id == "" {
		return true
	}
	a.runsMu.Lock()
	defer a.runsMu.Unlock()
	if _, taken := a.runs[id]; taken {
		return false
	}
	a.runs[id] = cancel
	if a.cut {
		// Admitted just before the node stopped taking work, claimed
		// after Cut took its list: cut as the others were.
		cancel(ErrNodeStopping)
	}
	return true
}

// runCtx derives a run's context: cancelled by CANCEL_RUN (on the stream or
// by run id), by the Edge abandoning the stream, by the connection closing,
// or by timeoutSec (> 0). It fails with errRunIDInUse, having started
// nothing, when another run holds runID.
func (a *Agent) runCtx(ctx context.Context, st *nodewire.Stream, runID string, timeoutSec uint32) (context.Context, func(), error) {
	rctx, cancel := context.WithCancelCause(ctx)
	if !a.claimRun(runID, cancel) {
		cancel(nil)
		return nil, nil, errRunIDInUse
	}
	var tcancel context.CancelFunc = func() {}
	if timeoutSec > 0 {
		rctx, tcancel = context.WithTimeout(rctx, time.Duration(timeoutSec)*time.Second)
	}
	w := watchCancel(st, cancel)
	// A send blocked on the Edge's window credit (an adapter's Delta or
	// Body, or the terminal message) does not see the context: once it
	// has ended, give such a send cancelSendGrace, then fail it.
	stopGrace := context.AfterFunc(rctx, func() { _ = st.SetWriteDeadline(time.Now().Add(cancelSendGrace)) })
	stop := func() {
		stopGrace()
		a.untrackRun(runID)
		w.stop(afterTerminalWait)
		tcancel()
		cancel(nil)
	}
	return rctx, stop, nil
}

// runSink sends DELTA events: each at once for a streamed run; queued for
// the terminal event's write otherwise (nobody reads them one by one).
type runSink struct {
	st     *nodewire.Stream
	runID  string
	seq    *uint64
	stream bool

	// ev, evEnv and env are reused by every DELTA (Send and Queue encode
	// before they return; the adapter calls Delta from one goroutine): a
	// streamed delta allocates nothing here.
	ev    iop.RunEvent
	evEnv iop.Envelope_RunEvent
	env   iop.Envelope
}

func (s *runSink) Delta(text string) error { return s.delta(text, "") }

// Reasoning sends reasoning text as a DELTA event's reasoning field
// (adapter.ReasoningSink).
func (s *runSink) Reasoning(text string) error { return s.delta("", text) }

func (s *runSink) delta(text, reasoning string) error {
	if text == "" && reasoning == "" {
		return nil
	}
	*s.seq++
	s.ev = iop.RunEvent{RunId: s.runID, Sequence: *s.seq, Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: text, Reasoning: reasoning}
	s.evEnv.RunEvent = &s.ev
	s.env.Body = &s.evEnv
	if s.stream {
		return s.st.Send(&s.env)
	}
	return s.st.Queue(&s.env)
}

func runEvent(ev *iop.RunEvent) *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}}
}

// serveRun runs a RunRequest: START, DELTAs, then exactly one terminal.
//
// As in serveTunnel, nothing here uses req once the adapter has it (the
// closures below take the run id, not req): a streamed run parks this
// frame for its whole life, and req holds the whole prompt.
func (a *Agent) serveRun(ctx context.Context, st *nodewire.Stream, req *iop.RunRequest) {
	runID := req.GetRunId()
	log := a.log.With(zap.String("run_id", runID), zap.String("adapter", req.GetAdapter()))
	var seq uint64
	send := func(ev *iop.RunEvent) error {
		seq++
		ev.RunId, ev.Sequence = runID, seq
		return st.Send(runEvent(ev))
	}
	fail := func(code iop.ErrorCode, msg string) {
		_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_ERROR, Error: &iop.RunError{Code: code, Message: msg}})
	}
	ctx, span := a.tracer.Start(tracing.Extract(ctx, req.GetMetadata()), "iop.node.run", trace.WithAttributes(
		attribute.String("iop.adapter", req.GetAdapter()), attribute.String("iop.run_id", runID), attribute.String("iop.operation", req.GetOperation().String())))
	defer span.End()
	in, err := a.admit(req.GetAdapter())
	if err != nil {
		re := refusal(err, in, req.GetAdapter())
		fail(re.Code, re.Message)
		return
	}
	defer a.leave() // last: once the terminal event is out (HandleStream then drops the stream)
	// The slot is freed before the terminal event goes out: the Edge
	// releases its lease when it sees that event and may hand the slot to
	// the next waiter at once.
	release := sync.OnceFunc(in.exit)
	defer release()
	in.stats.requests.Add(1)

	rctx, stop, err := a.runCtx(ctx, st, runID, req.GetTimeoutSec())
	if err != nil {
		in.stats.errors.Add(1)
		log.Warn("run refused", zap.Error(err))
		fail(adapter.CodeInternal, "run id already in use on this node")
		return
	}
	defer stop()
	seq++
	if err := st.Queue(runEvent(&iop.RunEvent{RunId: runID, Sequence: seq, Type: iop.RunEventType_RUN_EVENT_TYPE_START})); err != nil {
		return
	}
	op := req.GetOperation() // req is not used past Run (see above)
	res, err := runAdapter(rctx, in.impl, req, &runSink{st: st, runID: runID, seq: &seq, stream: req.GetStream()}, log)
	release()
	if err == nil {
		if res == nil {
			res = &adapter.Result{}
		}
		fr := res.FinishReason
		if fr == "" {
			fr = "stop"
		}
		in.stats.addUsage(res.Usage)
		err := send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: fr, Usage: res.Usage, Metadata: res.Metadata, Output: res.Output})
		if re := undeliverable(err, op); re != nil {
			// Nothing of the COMPLETE was written (the stream is intact), so
			// the run still ends with a terminal event the edge can render,
			// not with a stream closed early that reads as a lost node.
			seq--
			in.stats.errors.Add(1)
			log.Warn("run answer not deliverable", zap.Error(err))
			_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_ERROR, Error: re})
		}
		return
	}
	in.stats.errors.Add(1)
	if re := stoppedRun(rctx); re != nil {
		_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_ERROR, Error: re})
		return
	}
	if errors.Is(err, context.Canceled) && rctx.Err() != nil && ctx.Err() == nil {
		_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_CANCELLED})
		return
	}
	re := toRunError(err, rctx)
	if re.Code == adapter.CodeInternal && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		log.Warn("run failed", zap.Error(err))
	}
	_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_ERROR, Error: re})
}

// stoppedRun is the error a run or tunnel that Cut ended (rctx's cause)
// ends with, or nil. It is a draining node's refusal in kind (another
// candidate may serve it), though the adapter had begun.
func stoppedRun(rctx context.Context) *iop.RunError {
	if !errors.Is(context.Cause(rctx), ErrNodeStopping) {
		return nil
	}
	return &iop.RunError{Code: adapter.CodeCapacityExceeded, Message: "The node stopped before the request finished: it is shutting down."}
}

// refusal is the error a run or tunnel that admit refused (err) ends
// with; nothing was started. A draining node answers as a full one does:
// the edge tries another candidate.
func refusal(err error, in *instance, name string) *iop.RunError {
	switch {
	case errors.Is(err, errDraining):
		return &iop.RunError{Code: adapter.CodeCapacityExceeded, Message: fmt.Sprintf("adapter %q is draining: its node is shutting down", name)}
	case errors.Is(err, errAtCapacity):
		in.stats.rejected.Add(1)
		return &iop.RunError{Code: adapter.CodeCapacityExceeded, Message: fmt.Sprintf("adapter %q is at capacity", in.name)}
	default:
		return &iop.RunError{Code: adapter.CodeUnsupported, Message: fmt.Sprintf("no adapter %q on this node", name)}
	}
}

// errAdapterPanic is an adapter call that panicked (an adapter bug, such
// as a field of the request it did not expect to be missing).
var errAdapterPanic = errors.New("nodeagent: adapter panicked")

// runAdapter calls the adapter's Run, turning a panic on this goroutine
// into an internal error: one adapter bug fails its own run, not the node
// and every run on it. (A panic on a goroutine the adapter started is
// beyond reach here; adapters recover none and start few.)
func runAdapter(ctx context.Context, impl adapter.Instance, req *iop.RunRequest, sink adapter.RunSink, log *zap.Logger) (res *adapter.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, adapterPanicked(p, log)
		}
	}()
	return impl.Run(ctx, req, sink)
}

// tunnelAdapter is runAdapter for Tunnel. The logger's fields are added
// only on a panic: a tunnel is the hot path, and With allocates.
func tunnelAdapter(ctx context.Context, impl adapter.Instance, req *iop.ProviderTunnelRequest, sink adapter.TunnelSink, log *zap.Logger, runID, name string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = adapterPanicked(p, log.With(zap.String("run_id", runID), zap.String("adapter", name)))
		}
	}()
	return impl.Tunnel(ctx, req, sink)
}

// query calls one of an adapter's queries (Models, Health, Sessions,
// TerminateSession: they parse what the backend answers) as runAdapter
// calls Run: a panic fails that answer (errAdapterPanic), not the node.
func query[T any](log *zap.Logger, name string, f func() (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			var zero T
			v, err = zero, adapterPanicked(p, log.With(zap.String("adapter", name)))
		}
	}()
	return f()
}

// health is the instance's health through query; a panic reads as
// unknown (no claim either way).
func (in *instance) health(ctx context.Context, hr adapter.HealthReporter, log *zap.Logger) adapter.Health {
	h, err := query(log, in.name, func() (adapter.Health, error) { return hr.Health(ctx), nil })
	if err != nil {
		return adapter.Health{Status: adapter.HealthUnknown}
	}
	return h
}

// adapterPanicked logs a recovered panic with its stack. The value is a
// runtime error or an adapter's own message; adapters put no request
// content in one.
func adapterPanicked(p any, log *zap.Logger) error {
	log.Error("adapter panicked", zap.String("panic", fmt.Sprint(p)), zap.Stack("stack"))
	return fmt.Errorf("%w: %v", errAdapterPanic, p)
}

// undeliverable classifies a terminal event's send failure that wrote
// nothing, or returns nil: an answer over the wire's frame limit (the
// embeddings of a large batch; a chat answer that large only comes from a
// broken upstream) or one the wire refuses to encode (a string that is not
// UTF-8). Embeddings are sized by the request, so the caller is told to
// split it, and no other candidate is tried; a chat answer is the
// upstream's fault.
func undeliverable(err error, op iop.RunOperation) *iop.RunError {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nodewire.ErrFrameTooLarge) && op == adapter.OpEmbedding:
		e := adapter.EmbeddingsTooLarge()
		return &iop.RunError{Code: e.Code, Message: e.Message}
	case errors.Is(err, nodewire.ErrFrameTooLarge):
		return &iop.RunError{Code: adapter.CodeUpstream, HttpStatus: http.StatusBadGateway, Message: fmt.Sprintf(
			"The provider's answer is larger than one response may carry (%d MiB).", nodewire.DefaultMaxFrameSize>>20)}
	case errors.Is(err, nodewire.ErrEncode):
		return &iop.RunError{Code: adapter.CodeUpstream, HttpStatus: http.StatusBadGateway, Message: "The provider's answer is not valid UTF-8."}
	}
	return nil
}

// toRunError classifies an adapter error for the wire.
func toRunError(err error, ctx context.Context) *iop.RunError {
	var ae *adapter.Error
	switch {
	case errors.As(err, &ae):
		return &iop.RunError{Code: ae.Code, Message: ae.Message, HttpStatus: int32(ae.HTTPStatus), RetryAfterSec: int32(ae.RetryAfterSec)}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &iop.RunError{Code: adapter.CodeTimeout, Message: "run timed out"}
	case errors.Is(err, adapter.ErrUnsupported):
		return &iop.RunError{Code: adapter.CodeUnsupported, Message: "operation not supported by this provider"}
	default:
		return &iop.RunError{Code: adapter.CodeInternal, Message: "internal adapter error"}
	}
}

// tunnelSink sends ordered tunnel frames. Body frames of a streamed
// response (SSE, or the caller asked for a stream) are written the moment
// they arrive; everything else is queued and shares the next write.
type tunnelSink struct {
	st        *nodewire.Stream
	runID     string
	seq       uint64
	status    bool
	flushEach bool
	stats     *usageStats

	// body is reused by every Body frame, and bodyEnv and env by every
	// frame (Send and Queue encode before they return): a streamed chunk
	// allocates nothing here, and another frame only itself.
	body    iop.ProviderTunnelFrame
	bodyEnv iop.Envelope_ProviderTunnelFrame
	env     iop.Envelope
}

// frame stamps f and wraps it in the sink's envelope, for one Send or
// Queue (see release).
func (s *tunnelSink) frame(f *iop.ProviderTunnelFrame) *iop.Envelope {
	s.stamp(f)
	s.bodyEnv.ProviderTunnelFrame = f
	s.env.Body = &s.bodyEnv
	return &s.env
}

// release lets go of the frame the envelope wrapped, once encoded: the
// sink lives as long as the exchange, the frame (usage, an error) need
// not.
func (s *tunnelSink) release() { s.bodyEnv.ProviderTunnelFrame = nil }

// stamp gives f the exchange's next sequence number, and its run id
// unless f is a BODY frame (runtime.proto: the stream identifies a body
// frame's exchange, and a streamed answer sends one per chunk).
func (s *tunnelSink) stamp(f *iop.ProviderTunnelFrame) {
	s.seq++
	f.Sequence = s.seq
	if f.Kind != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY {
		f.RunId = s.runID
	}
}

func (s *tunnelSink) send(f *iop.ProviderTunnelFrame) error {
	defer s.release()
	return s.st.Send(s.frame(f))
}

func (s *tunnelSink) queue(f *iop.ProviderTunnelFrame) error {
	defer s.release()
	return s.st.Queue(s.frame(f))
}

var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (s *tunnelSink) Status(code int, h http.Header) error {
	if s.status {
		return fmt.Errorf("nodeagent: tunnel status sent twice")
	}
	s.status = true
	// The headers are allocated together, in one block, rather than one
	// by one.
	n := 0
	for name, vals := range h {
		if !droppedStatusHeader(name) {
			n += len(vals)
		}
	}
	var hs []*iop.Header
	if n > 0 {
		hs = make([]*iop.Header, 0, n)
		block := make([]iop.Header, n)
		for name, vals := range h {
			if droppedStatusHeader(name) {
				continue
			}
			for _, v := range vals {
				hd := &block[len(hs)]
				hd.Name, hd.Value = name, v
				hs = append(hs, hd)
			}
		}
	}
	if strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		s.flushEach = true
	}
	return s.queue(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, StatusCode: int32(code), Headers: hs})
}

// droppedStatusHeader reports whether a response header stays off the
// status frame: hop-by-hop headers, and Content-Length (the edge frames
// the body itself).
func droppedStatusHeader(name string) bool {
	return isHopByHop(name) || strings.EqualFold(name, "Content-Length")
}

func isHopByHop(name string) bool {
	for _, h := range hopByHop {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	return false
}

func (s *tunnelSink) Body(p []byte) error {
	if !s.status {
		return fmt.Errorf("nodeagent: tunnel body before status")
	}
	for len(p) > 0 {
		n := min(len(p), nodewire.MaxBodyChunk)
		// The frame is encoded before Send returns, so p and the frame
		// may be reused.
		s.body.Kind, s.body.Body = iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, p[:n]
		s.stamp(&s.body)
		s.bodyEnv.ProviderTunnelFrame = &s.body
		s.env.Body = &s.bodyEnv
		var err error
		if s.flushEach {
			err = s.st.Send(&s.env)
		} else {
			err = s.st.Queue(&s.env)
		}
		s.body.Body = nil // not kept past the call
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

func (s *tunnelSink) Usage(u *iop.Usage) error {
	s.stats.addUsage(u)
	return s.queue(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE, Usage: u})
}

func (s *tunnelSink) Metadata(m map[string]string) error {
	return s.queue(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_METADATA, Metadata: m})
}

// serveTunnel runs a ProviderTunnelRequest: STATUS, BODY..., then exactly
// one END or ERROR frame.
//
// Nothing here uses req once the adapter has it: the adapter lets go of
// the request body (the prompt) once sent, and so must this frame, parked
// here for as long as the answer streams.
func (a *Agent) serveTunnel(ctx context.Context, st *nodewire.Stream, req *iop.ProviderTunnelRequest) {
	runID := req.GetRunId()
	sink := &tunnelSink{st: st, runID: runID, flushEach: req.GetStream()}
	fail := func(re *iop.RunError) {
		_ = sink.send(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR, End: true, Error: re})
	}
	ctx, span := a.tracer.Start(tracing.Extract(ctx, req.GetMetadata()), "iop.node.tunnel", trace.WithAttributes(
		attribute.String("iop.adapter", req.GetAdapter()), attribute.String("iop.run_id", runID), attribute.String("iop.path", req.GetPath())))
	defer span.End()
	in, err := a.admit(req.GetAdapter())
	if err != nil {
		fail(refusal(err, in, req.GetAdapter()))
		return
	}
	defer a.leave() // last: once the terminal frame is out (HandleStream then drops the stream)
	sink.stats = &in.stats
	release := sync.OnceFunc(in.exit) // freed before the terminal frame, as in serveRun
	defer release()
	in.stats.requests.Add(1)
	rctx, stop, err := a.runCtx(ctx, st, runID, req.GetTimeoutSec())
	if err != nil {
		in.stats.errors.Add(1)
		a.log.Warn("tunnel refused", zap.String("run_id", runID), zap.Error(err))
		fail(&iop.RunError{Code: adapter.CodeInternal, Message: "run id already in use on this node"})
		return
	}
	defer stop()
	err = tunnelAdapter(rctx, in.impl, req, sink, a.log, runID, in.name)
	release()
	if err == nil {
		_ = sink.send(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true})
		return
	}
	in.stats.errors.Add(1)
	if re := stoppedRun(rctx); re != nil {
		fail(re)
		return
	}
	re := toRunError(err, rctx)
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		re = &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_CANCELLED, Message: "tunnel cancelled"}
	}
	if re.Code == adapter.CodeInternal && ctx.Err() == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.ErrClosedPipe) {
		a.log.Warn("tunnel failed", zap.String("run_id", runID), zap.Error(err))
	}
	fail(re)
}
