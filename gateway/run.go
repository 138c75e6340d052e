package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// streamRenderer renders a run as SSE (chat and completion streams).
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
	Result() ([]byte, *openaiapi.Error)
	Usage() (openaiapi.Usage, bool)
}

// run sends a normalized RunRequest and renders its events. It returns the
// lease's release reason.
//
// Like tunnel (see there), it keeps the frames parked under a held stream
// small: the setup, the whole-response and the streamed rendering are
// separate calls, sharing one heap object as their state.
func (s *Server) run(c *gin.Context, lease *dispatch.Lease, k *call) dispatch.ReleaseReason {
	r := s.openRun(c, lease, k)
	if r == nil {
		return dispatch.ReasonError
	}
	defer r.close()
	if !k.stream {
		return r.whole()
	}
	return r.stream()
}

// runExchange is the state of one run (see run).
type runExchange struct {
	s         *Server
	c         *gin.Context
	in        *reqInfo
	k         *call
	rs        *dispatch.RunStream
	limits    *config.EdgeLimits
	start     time.Time
	wait      *time.Timer
	stopWatch func() bool
	cs        cancelState
}

// openRun converts the call and opens the run; on failure it writes the
// error response and returns nil.
//
//go:noinline
func (s *Server) openRun(c *gin.Context, lease *dispatch.Lease, k *call) *runExchange {
	in := info(c)
	ctx := c.Request.Context()
	start := time.Now()
	input, err := openaiapi.RunInput(k.body)
	if err != nil {
		writeError(c, apiError(err, k.model))
		return nil
	}
	rs, err := lease.OpenRun(ctx, &iop.RunRequest{
		RunId: newID("run_"), Workspace: lease.Workspace, Input: input, Operation: k.op,
		Stream: k.stream, SessionId: lease.SessionID,
		Metadata: wireMetadata(ctx, in.requestID),
	})
	if err != nil {
		writeError(c, apiError(err, k.model))
		return nil
	}
	r := &runExchange{s: s, c: c, in: in, k: k, rs: rs, limits: s.limits.Load(), start: start}
	r.stopWatch = r.cs.watch(ctx, rs)
	r.wait = time.AfterFunc(time.Duration(r.limits.ResponseTimeoutSec)*time.Second, func() { r.cs.cancel(r.rs, CancelTimeout) })
	return r
}

// close ends the run, last thing in run (also on a panic).
func (r *runExchange) close() {
	r.wait.Stop()
	r.stopWatch()
	closeExchange(&r.cs, r.rs)
}

// firstToken records the time to the first token, once.
func (r *runExchange) firstToken() {
	if r.in.ttft == 0 {
		r.wait.Stop()
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
		agg = openaiapi.NewEmbeddingAggregator(k.embed)
	default:
		agg = openaiapi.NewChatAggregator(k.render)
	}
	for {
		ev, err := r.rs.Recv()
		if err == nil && cs.get() != "" {
			// Cancelled: what still arrives (the node's CANCELLED
			// terminal) is not the run's answer.
			err = context.Canceled
		}
		if err != nil {
			return s.failedBeforeFirstByte(c, cs, err, k.model)
		}
		if ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_DELTA {
			r.firstToken()
		}
		if agg.Add(ev) {
			break
		}
	}
	s.recordUsage(in, k.model, agg.Usage)
	out, aerr := agg.Result()
	if aerr != nil {
		writeError(c, aerr)
		return dispatch.ReasonError
	}
	r.firstToken()
	c.Data(http.StatusOK, "application/json", out)
	return dispatch.ReasonCompleted
}

// stream renders the run as SSE.
//
//go:noinline
func (r *runExchange) stream() dispatch.ReleaseReason {
	sw := r.streamWriter()
	for !sw.Done() {
		ev, err := r.rs.Recv()
		if err == nil && r.cs.get() != "" {
			err = context.Canceled // see whole
		}
		if err != nil {
			return r.streamFailed(sw, err)
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

// streamWriter returns the SSE renderer for the call.
//
//go:noinline
func (r *runExchange) streamWriter() streamRenderer {
	c := r.c
	w := newDeadlineWriter(c.Writer, time.Duration(r.limits.WriteTimeoutSec)*time.Second)
	opts := r.k.render
	opts.OnFirstWrite = func() {
		h := c.Writer.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		c.Status(http.StatusOK)
		c.Writer.WriteHeaderNow()
		r.firstToken()
	}
	if r.k.op == opCompletion {
		return openaiapi.NewCompletionStreamWriter(w, func() { _ = w.Flush() }, opts)
	}
	return openaiapi.NewChatStreamWriter(w, func() { _ = w.Flush() }, opts)
}

// streamFailed ends a stream whose run failed or was cancelled.
//
//go:noinline
func (r *runExchange) streamFailed(sw streamRenderer, err error) dispatch.ReleaseReason {
	if !sw.Started() {
		return r.s.failedBeforeFirstByte(r.c, &r.cs, err, r.k.model)
	}
	if reason := r.cs.get(); reason != "" {
		return r.s.cancelled(r.in, reason)
	}
	_ = sw.Abort(apiError(err, r.k.model))
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
