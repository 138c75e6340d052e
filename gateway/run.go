package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

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
func (s *Server) run(c *gin.Context, lease *dispatch.Lease, k *call) dispatch.ReleaseReason {
	in := info(c)
	ctx := c.Request.Context()
	start := time.Now()
	input, err := openaiapi.RunInput(k.body)
	if err != nil {
		writeError(c, apiError(err, k.model))
		return dispatch.ReasonError
	}
	rs, err := lease.OpenRun(ctx, &iop.RunRequest{
		RunId: newID("run_"), Workspace: lease.Workspace, Input: input, Operation: k.op,
		Stream: k.stream, SessionId: lease.SessionID,
		Metadata: wireMetadata(ctx, in.requestID),
	})
	if err != nil {
		writeError(c, apiError(err, k.model))
		return dispatch.ReasonError
	}
	cs := &cancelState{}
	defer closeExchange(cs, rs)
	defer cs.watch(ctx, rs)()
	limits := s.limits.Load()
	wait := time.AfterFunc(time.Duration(limits.ResponseTimeoutSec)*time.Second, func() { cs.cancel(rs, CancelTimeout) })
	defer wait.Stop()
	firstToken := func() {
		if in.ttft == 0 {
			wait.Stop()
			in.ttft = time.Since(start)
			s.metrics.firstToken(k.model, routeRun, in.ttft)
		}
	}

	if !k.stream {
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
			ev, err := rs.Recv()
			if err == nil && cs.get() != "" {
				// Cancelled: what still arrives (the node's CANCELLED
				// terminal) is not the run's answer.
				err = context.Canceled
			}
			if err != nil {
				return s.failedBeforeFirstByte(c, cs, err, k.model)
			}
			if ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_DELTA {
				firstToken()
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
		firstToken()
		c.Data(http.StatusOK, "application/json", out)
		return dispatch.ReasonCompleted
	}

	w := newDeadlineWriter(c.Writer, time.Duration(limits.WriteTimeoutSec)*time.Second)
	opts := k.render
	opts.OnFirstWrite = func() {
		h := c.Writer.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		c.Status(http.StatusOK)
		c.Writer.WriteHeaderNow()
		firstToken()
	}
	var sw streamRenderer
	if k.op == opCompletion {
		sw = openaiapi.NewCompletionStreamWriter(w, func() { _ = w.Flush() }, opts)
	} else {
		sw = openaiapi.NewChatStreamWriter(w, func() { _ = w.Flush() }, opts)
	}
	for !sw.Done() {
		ev, err := rs.Recv()
		if err == nil && cs.get() != "" {
			err = context.Canceled // see the non-streamed loop
		}
		if err != nil {
			if !sw.Started() {
				return s.failedBeforeFirstByte(c, cs, err, k.model)
			}
			if reason := cs.get(); reason != "" {
				return s.cancelled(in, reason)
			}
			_ = sw.Abort(apiError(err, k.model))
			return dispatch.ReasonError
		}
		if err := sw.Add(ev); err != nil {
			var ae *openaiapi.Error
			if errors.As(err, &ae) {
				break // the run failed before any byte: answered below
			}
			return s.writeFailed(in, cs, rs, err)
		}
	}
	s.recordUsage(in, k.model, sw.Usage)
	if f := sw.Failure(); f != nil {
		if !sw.Started() {
			writeError(c, f)
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
