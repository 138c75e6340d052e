package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// streamRenderer renders a run as SSE (chat and completion streams).
//
// Add (here and in aggregator) must not keep ev past its return: a DELTA
// event is lent by the stream until the next RecvBy (dispatch
// Stream.RecvBy); its values (strings, usage, error) may be kept.
type streamRenderer interface {
	Add(ev *iop.RunEvent) error
	Abort(e *openaiapi.Error) error
	Started() bool
	Done() bool
	Failure() *openaiapi.Error
	Usage() (openaiapi.Usage, bool)
}

// aggregator renders a run as one JSON document.
type aggregator interface {
	Add(ev *iop.RunEvent) bool
	Abandoned() bool
	Result() ([]byte, *openaiapi.Error)
	Usage() (openaiapi.Usage, bool)
}

// cancelAnswerTooLarge is the CancelRequest reason of a run whose
// non-streamed answer outgrew openaiapi.MaxAnswerBytes. It is not an
// iop_cancellations_total reason: the edge gave up on a faulty answer, and
// the request counts as the upstream error it answers.
const cancelAnswerTooLarge = "answer_too_large"

// run sends a normalized RunRequest and renders its events. It releases
// the lease.
//
// Like tunnel (see there), it keeps the frames parked under a held stream
// small: the setup, the whole-response and the streamed rendering are
// separate calls, sharing one heap object as their state.
func (s *Server) run(c *gin.Context, lease *dispatch.Lease, k *call) {
	r := &runExchange{s: s, c: c, k: k, lease: lease, reason: dispatch.ReasonError}
	defer r.close()
	if !r.open() {
		return
	}
	if !k.stream {
		r.reason = r.whole()
		return
	}
	r.reason = r.stream()
}

// runExchange is the state of one run (see run).
type runExchange struct {
	s        *Server
	c        *gin.Context
	in       *reqInfo
	k        *call
	lease    *dispatch.Lease
	rs       *dispatch.RunStream
	limits   *config.EdgeLimits
	start    time.Time
	deadline time.Time // the response timeout: the first delta by then
	started  bool      // a delta arrived: from now on the idle timeout applies
	cs       cancelState
	reason   dispatch.ReleaseReason // the lease's release reason (also on a panic)
	w        *deadlineWriter        // a stream's writer (streamWriter); nil until then
	fb       flushBatch             // a stream's events written but not yet flushed
}

// open converts the call and opens the run; on failure it writes the
// error response and returns false.
//
//go:noinline
func (r *runExchange) open() bool {
	s, c, k, lease := r.s, r.c, r.k, r.lease
	r.in = info(c)
	ctx := c.Request.Context()
	r.start = time.Now()
	r.limits = s.limits.Load()
	r.deadline = r.start.Add(time.Duration(r.limits.ResponseTimeoutSec) * time.Second)
	// One model, one `model` value whatever the route: the tunnel relays
	// the upstream's own answer, which names the provider's target (as
	// OpenAI names the dated snapshot that served a request), so a run
	// renders the target too. Rewriting tunnelled bodies instead would
	// cost every streamed event a parse.
	k.render.Model = lease.Target
	input, op, err := normalizedInput(k)
	if err != nil {
		writeError(c, apiError(err, k.model))
		return false
	}
	// Sending counts against the response timeout (see tunnel's open).
	rs, err := lease.OpenRun(ctx, r.deadline, &iop.RunRequest{
		RunId: newID("run_"), Workspace: lease.Workspace, Input: input, Operation: op,
		Stream: k.stream, SessionId: lease.SessionID,
		Metadata: wireMetadata(ctx, r.in.requestID),
	})
	if err != nil {
		if ctx.Err() == nil && s.failoverErr(c, k, lease, &r.cs, err) {
			return false // the lease goes back as an error; the next attempt answers
		}
		r.reason = s.openFailed(c, err, k.model)
		return false
	}
	r.rs = rs
	rs.SetDone(ctx.Done()) // the client gone: see recv
	return true
}

// normalizedInput is the run input of the call, normalized here whatever
// the surface it came from, and its operation.
func normalizedInput(k *call) (*iop.RunInput, iop.RunOperation, error) {
	if k.parsed == nil { // runRoute sends only parsed calls here
		return nil, 0, openaiapi.InternalError("The request cannot be served as a run.")
	}
	in, err := k.parsed.RunInput()
	switch k.op {
	case opCompletion:
		return in, iop.RunOperation_RUN_OPERATION_COMPLETION, err
	case opEmbedding:
		return in, iop.RunOperation_RUN_OPERATION_EMBEDDING, err
	default:
		return in, iop.RunOperation_RUN_OPERATION_CHAT, err
	}
}

// close ends the run and hands the lease back (see dispatch
// Stream.Finish), last thing in run (also on a panic).
func (r *runExchange) close() {
	if r.rs == nil {
		r.lease.Release(r.reason)
		return
	}
	if r.fb.take() {
		// Events written while their successors were already here: they
		// reach the client before Finish, which may wait for the node.
		_ = r.w.Flush()
	}
	r.rs.Finish(r.lease, r.reason, r.cs.get(), r.lease.CancelGrace)
}

// recv returns the next event: bounded by the response timeout until the
// first delta, then by the stream idle timeout between two events. A
// timeout records the cancellation (reason timeout; Finish sends it after
// the client's answer) and returns the error; the client's going away
// cancels the run as client_disconnect (clientGone).
func (r *runExchange) recv() (*iop.RunEvent, error) {
	deadline := r.deadline
	if r.started {
		deadline = time.Time{}
		if idle := r.limits.StreamIdleTimeout(); idle > 0 {
			deadline = time.Now().Add(idle)
		}
	}
	if r.fb.beforeWait(r.rs) {
		// A failed flush shows in the next write, as in flushEvents.
		_ = r.w.Flush()
	}
	ev, err := r.rs.RecvBy(deadline)
	err = r.cs.clientGone(r.rs, err)
	if errors.Is(err, dispatch.ErrRecvTimeout) {
		r.cs.record(CancelTimeout)
	}
	if err == nil && r.cs.get() != "" {
		// Cancelled: what still arrives (the node's CANCELLED terminal) is
		// not the run's answer.
		err = context.Canceled
	}
	if ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_DELTA {
		r.started = true
	}
	return ev, err
}

// firstToken records the time to the first token, once.
func (r *runExchange) firstToken() {
	if r.in.ttft == 0 {
		r.in.ttft = time.Since(r.start)
		r.s.metrics.firstToken(r.k.model, routeRun, r.in.ttft)
	}
}

// whole renders the run as one JSON document.
//
//go:noinline
func (r *runExchange) whole() dispatch.ReleaseReason {
	s, c, k, in, cs := r.s, r.c, r.k, r.in, &r.cs
	var agg aggregator
	switch k.op {
	case opCompletion:
		agg = openaiapi.NewCompletionAggregator(k.render)
	case opEmbedding:
		agg = openaiapi.NewEmbeddingAggregator(embedOptions(k, r.lease.Target))
	default:
		agg = openaiapi.NewChatAggregator(k.render)
	}
	for {
		ev, err := r.recv()
		if err != nil {
			// Nothing was written: another candidate may still answer.
			if s.failoverErr(c, k, r.lease, cs, err) {
				return dispatch.ReasonError
			}
			return s.failedBeforeFirstByte(c, cs, err, k.model)
		}
		if ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_ERROR {
			if why := retryableRun(ev.GetError()); why != "" && s.failover(c, k, r.lease, why) {
				return dispatch.ReasonError
			}
		}
		if ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_DELTA {
			r.firstToken()
		}
		if agg.Add(ev) {
			break
		}
	}
	if agg.Abandoned() {
		// The run is still going at the node: close (Finish) cancels it
		// after this answer and returns the lease once the node stopped.
		cs.record(cancelAnswerTooLarge)
	}
	// After Result: the aggregator settles the usage when it renders.
	out, aerr := agg.Result()
	s.recordUsage(in, k.model, agg.Usage)
	if aerr != nil {
		writeError(c, aerr)
		return dispatch.ReasonError
	}
	r.firstToken()
	// The answer (up to the aggregator's bound) goes out under the write
	// timeout like a stream (writeWhole): a client that stops reading it
	// would otherwise hold the handler, and the lease, for ever.
	h := c.Writer.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	c.Status(http.StatusOK)
	c.Writer.WriteHeaderNow()
	if err := newDeadlineWriter(c.Writer, time.Duration(r.limits.WriteTimeoutSec)*time.Second).writeWhole(out); err != nil {
		return s.writeFailed(in, cs, r.rs, err)
	}
	return dispatch.ReasonCompleted
}

// stream renders the run as SSE.
//
//go:noinline
func (r *runExchange) stream() dispatch.ReleaseReason {
	sw := r.streamWriter()
	for !sw.Done() {
		ev, err := r.recv()
		if err != nil {
			if !sw.Started() && r.s.failoverErr(r.c, r.k, r.lease, &r.cs, err) {
				return dispatch.ReasonError
			}
			return r.streamFailed(sw, err)
		}
		if ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_ERROR && !sw.Started() {
			if why := retryableRun(ev.GetError()); why != "" && r.s.failover(r.c, r.k, r.lease, why) {
				return dispatch.ReasonError
			}
		}
		if err := sw.Add(ev); err != nil {
			var ae *openaiapi.Error
			if errors.As(err, &ae) {
				break // the run failed before any byte: answered below
			}
			return r.s.writeFailed(r.in, &r.cs, r.rs, err)
		}
	}
	return r.streamEnd(sw)
}

// embedOptions is how an embedding call's answer is rendered, naming
// target (see open): read from its parsed request here rather than kept
// in every call (see call). An embedding call always has one (parsed is
// dropped only once an answer has begun, after this); without it the
// options are empty and the aggregator renders what the run returned.
func embedOptions(k *call, target string) openaiapi.EmbeddingOptions {
	var opts openaiapi.EmbeddingOptions
	if req, ok := k.parsed.(*openaiapi.EmbeddingRequest); ok {
		opts = req.RenderOptions()
	}
	opts.Model = target
	return opts
}

// streamWriter returns the SSE renderer for the call.
//
//go:noinline
func (r *runExchange) streamWriter() streamRenderer {
	c := r.c
	w := newDeadlineWriter(c.Writer, time.Duration(r.limits.WriteTimeoutSec)*time.Second)
	opts := r.k.render
	opts.OnFirstWrite = func() {
		setSSEHeaders(c.Writer.Header())
		c.Status(http.StatusOK)
		c.Writer.WriteHeaderNow()
		r.firstToken()
		r.k.answered()
	}
	r.w = w
	if r.k.op == opCompletion {
		return openaiapi.NewCompletionStreamWriter(w, r.flushEvents, opts)
	}
	return openaiapi.NewChatStreamWriter(w, r.flushEvents, opts)
}

// flushEvents follows every batch of events the stream writer wrote: they
// are flushed at once unless the next event has already arrived, when
// they leave with it (flushBatch). A failed flush is not returned: the
// connection's next write fails too, and the writer reports that one.
func (r *runExchange) flushEvents() {
	if r.fb.afterWrite(r.rs, false) {
		_ = r.w.Flush()
	}
}

// streamFailed ends a stream whose run failed or was cancelled.
//
//go:noinline
func (r *runExchange) streamFailed(sw streamRenderer, err error) dispatch.ReleaseReason {
	if !sw.Started() {
		return r.s.failedBeforeFirstByte(r.c, &r.cs, err, r.k.model)
	}
	if reason := r.cs.get(); reason != "" {
		if reason == CancelTimeout {
			// Silent too long: the client is told, never given a clean
			// end.
			msg := msgNoAnswer
			if r.started {
				msg = msgIdle
			}
			r.in.outcome = http.StatusBadGateway
			_ = sw.Abort(openaiapi.UpstreamError(msg))
		}
		return r.s.cancelled(r.in, reason)
	}
	ae := apiError(err, r.k.model)
	r.in.outcome = int32(ae.Status)
	_ = sw.Abort(ae)
	return dispatch.ReasonError
}

// streamEnd answers the end of a stream: its usage, and a failure that
// came before any byte.
//
//go:noinline
func (r *runExchange) streamEnd(sw streamRenderer) dispatch.ReleaseReason {
	r.s.recordUsage(r.in, r.k.model, sw.Usage)
	if f := sw.Failure(); f != nil {
		if !sw.Started() {
			writeError(r.c, f)
		} else {
			r.in.outcome = int32(f.Status)
		}
		return dispatch.ReasonError
	}
	return dispatch.ReasonCompleted
}

func (s *Server) recordUsage(in *reqInfo, model string, usage func() (openaiapi.Usage, bool)) {
	if u, ok := usage(); ok {
		in.prompt, in.completion = u.PromptTokens, u.CompletionTokens
		s.metrics.usage(model, u.PromptTokens, u.CompletionTokens)
	}
}
