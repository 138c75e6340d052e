package gateway

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// hopHeaders never cross the edge in either direction; Authorization never
// goes upstream (the node adds the provider's own key).
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Host": true, "Authorization": true, "Cookie": true,
	"X-Iop-Session-Id": true,
}

func forwardHeaders(h http.Header) []*iop.Header {
	// Headers named by Connection are hop-by-hop too (RFC 9110 7.6.1).
	conn := map[string]bool{}
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			conn[http.CanonicalHeaderKey(strings.TrimSpace(f))] = true
		}
	}
	var out []*iop.Header
	for name, vals := range h {
		if hopHeaders[name] || conn[name] {
			continue
		}
		for _, v := range vals {
			out = append(out, &iop.Header{Name: name, Value: v})
		}
	}
	return out
}

// deadlineWriter bounds every write to the client by the write timeout, so a
// client that stops reading is detected (write_error) instead of holding
// the lease forever.
type deadlineWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func newDeadlineWriter(w http.ResponseWriter, timeout time.Duration) *deadlineWriter {
	return &deadlineWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.w.Write(p)
}

func (d *deadlineWriter) Flush() error {
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.rc.Flush()
}

// tunnel relays a raw provider exchange: status and headers, then each body
// frame written and flushed the moment it arrives. It returns the lease's
// release reason.
func (s *Server) tunnel(c *gin.Context, lease *dispatch.Lease, k *call) dispatch.ReleaseReason {
	in := info(c)
	ctx := c.Request.Context()
	start := time.Now()
	body, err := openaiapi.RewriteModel(k.body, lease.Target)
	if err != nil {
		writeError(c, apiError(err, k.model))
		return dispatch.ReasonError
	}
	path := k.path
	if q := c.Request.URL.RawQuery; q != "" {
		path += "?" + q
	}
	ts, err := lease.OpenTunnel(ctx, &iop.ProviderTunnelRequest{
		RunId: newID("run_"), Method: http.MethodPost, Path: path, Headers: forwardHeaders(c.Request.Header),
		Body: body, Stream: k.stream, SessionId: lease.SessionID,
		Metadata: wireMetadata(ctx, in.requestID),
	})
	if err != nil {
		writeError(c, apiError(err, k.model))
		return dispatch.ReasonError
	}
	cs := &cancelState{}
	defer closeExchange(cs, ts)
	stopWatch := cs.watch(ctx, ts)
	defer stopWatch()
	// Usage frames carry the latest cumulative figures; they are counted
	// once, when the exchange ends.
	defer func() { s.metrics.usage(k.model, in.prompt, in.completion) }()
	limits := s.limits.Load()
	wait := time.AfterFunc(time.Duration(limits.ResponseTimeoutSec)*time.Second, func() { cs.cancel(ts, CancelTimeout) })
	first, err := ts.Recv()
	wait.Stop()
	if err == nil && cs.get() != "" {
		// Cancelled: frames still in flight are not to be relayed.
		err = context.Canceled
	}
	if err != nil {
		return s.failedBeforeFirstByte(c, cs, err, k.model)
	}
	if first.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS {
		if first.GetKind() == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR {
			writeError(c, openaiapi.FromRunError(first.GetError()))
		} else {
			writeError(c, openaiapi.UpstreamError("The provider answered out of order."))
		}
		return dispatch.ReasonError
	}
	h := c.Writer.Header()
	sse := false
	for _, hd := range first.GetHeaders() {
		name := http.CanonicalHeaderKey(hd.GetName())
		if hopHeaders[name] || name == "X-Request-Id" {
			continue
		}
		h.Add(name, hd.GetValue())
		if name == "Content-Type" && strings.HasPrefix(hd.GetValue(), "text/event-stream") {
			sse = true
		}
	}
	if sse {
		h.Set("X-Accel-Buffering", "no")
	}
	c.Status(int(first.GetStatusCode()))
	c.Writer.WriteHeaderNow()
	w := newDeadlineWriter(c.Writer, time.Duration(limits.WriteTimeoutSec)*time.Second)
	// Streams are flushed frame by frame. A whole (non-streamed) body is
	// left to the response buffer so that its last bytes reach the client
	// only with the end of the response: a client that closes as soon as it
	// has parsed the JSON (SDKs do) would otherwise race the END and USAGE
	// frames and be counted as a client_disconnect, its usage lost.
	flushEach := sse || k.stream
	wroteBody := false
	for {
		f, err := ts.Recv()
		if err != nil {
			return s.failedAfterFirstByte(c, cs, w, sse, err)
		}
		switch f.GetKind() {
		case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY:
			if cs.get() != "" {
				// Cancelled: body still in flight is not relayed.
				return s.failedAfterFirstByte(c, cs, w, sse, context.Canceled)
			}
			if !wroteBody {
				wroteBody = true
				in.ttft = time.Since(start)
				s.metrics.firstToken(k.model, routeTunnel, in.ttft)
			}
			if _, err := w.Write(f.GetBody()); err != nil {
				return s.writeFailed(in, cs, ts, err)
			}
			if !flushEach {
				continue
			}
			if err := w.Flush(); err != nil {
				return s.writeFailed(in, cs, ts, err)
			}
			if sse && bytes.Contains(f.GetBody(), sseDone) {
				// The client has the whole stream and may hang up now
				// (SDKs do); that is not a cancellation. The usage and end
				// frames that follow are still read.
				stopWatch()
			}
		case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE:
			u := f.GetUsage()
			in.prompt, in.completion = u.GetPromptTokens(), u.GetCompletionTokens()
		case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_METADATA:
			s.log.Debug("tunnel metadata", zap.String("request_id", in.requestID), zap.Any("metadata", f.GetMetadata()))
		case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END:
			return dispatch.ReasonCompleted
		case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR:
			return s.failedAfterFirstByte(c, cs, w, sse, errTunnel(f.GetError()))
		}
	}
}

var sseDone = []byte("data: [DONE]")

type tunnelError struct{ re *iop.RunError }

func (e tunnelError) Error() string {
	return "gateway: tunnel error: " + e.re.GetCode() + ": " + e.re.GetMessage()
}

func errTunnel(re *iop.RunError) error { return tunnelError{re: re} }

// writeFailed ends an exchange whose write to the client failed. A write
// that ran into the write deadline is write_error even when net/http,
// seeing that failed write, has already cancelled the request context
// (which the watch records as client_disconnect); any other failure keeps a
// reason recorded before it (the client left first).
func (s *Server) writeFailed(in *reqInfo, cs *cancelState, x canceller, err error) dispatch.ReleaseReason {
	cs.cancel(x, CancelWriteError)
	reason := cs.get()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		reason = CancelWriteError
	}
	return s.cancelled(in, reason)
}

func (s *Server) cancelled(in *reqInfo, reason string) dispatch.ReleaseReason {
	in.cancelReason = reason
	s.metrics.cancelled(reason)
	return dispatch.ReasonCancelled
}

// failedBeforeFirstByte answers a failure that happened before any response
// byte: a proper status and envelope, or nothing when the client is gone.
func (s *Server) failedBeforeFirstByte(c *gin.Context, cs *cancelState, err error, model string) dispatch.ReleaseReason {
	if reason := cs.get(); reason != "" {
		rr := s.cancelled(info(c), reason)
		if reason == CancelTimeout {
			writeError(c, openaiapi.UpstreamError("The provider did not answer in time."))
		} else {
			c.Abort()
		}
		return rr
	}
	writeError(c, apiError(err, model))
	return dispatch.ReasonError
}

// failedAfterFirstByte ends a response that already started: an SSE error
// event (and no [DONE]) for event streams; for other bodies the connection
// is aborted so the client cannot mistake a truncated body for a whole one.
func (s *Server) failedAfterFirstByte(c *gin.Context, cs *cancelState, w *deadlineWriter, sse bool, err error) dispatch.ReleaseReason {
	if reason := cs.get(); reason != "" {
		return s.cancelled(info(c), reason)
	}
	if sse {
		msg := "The provider stream failed."
		if te, ok := err.(tunnelError); ok && te.re.GetMessage() != "" {
			msg = te.re.GetMessage()
		}
		_, _ = w.Write(openaiapi.SSEErrorEvent(openaiapi.UpstreamError(msg)))
		_ = w.Flush()
		return dispatch.ReasonError
	}
	panic(http.ErrAbortHandler)
}
