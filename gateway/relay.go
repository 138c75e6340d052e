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
	// The headers are allocated together, in one block, rather than one
	// by one.
	n := 0
	for name, vals := range h {
		if !hopHeaders[name] && !conn[name] {
			n += len(vals)
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]*iop.Header, 0, n)
	block := make([]iop.Header, n)
	for name, vals := range h {
		if hopHeaders[name] || conn[name] {
			continue
		}
		for _, v := range vals {
			hd := &block[len(out)]
			hd.Name, hd.Value = name, v
			out = append(out, hd)
		}
	}
	return out
}

// deadlineWriter bounds every write to the client by the write timeout, so a
// client that stops reading is detected (write_error) instead of holding
// the lease forever.
type deadlineWriter struct {
	w       http.ResponseWriter
	rc      http.ResponseController // a value: one allocation fewer
	timeout time.Duration
}

func newDeadlineWriter(w http.ResponseWriter, timeout time.Duration) *deadlineWriter {
	return &deadlineWriter{w: w, rc: *http.NewResponseController(w), timeout: timeout}
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
//
// A held stream parks its handler goroutine here, in ts.Recv, under
// net/http, gin and the middlewares, for as long as the stream lasts. So
// this frame (and those above it) is kept small: the setup, the first
// frame and each later frame are handled in separate calls, and the
// exchange's state lives in one heap object. Otherwise the goroutine's
// stack outgrows 8 KB on its first write to the client and, still using
// more than a quarter of 16 KB while parked, is never shrunk back: 8 KB
// more per held stream. Taking only what the relay needs from k also lets
// the request body and the parsed request be collected once sent.
func (s *Server) tunnel(c *gin.Context, lease *dispatch.Lease, k *call) dispatch.ReleaseReason {
	t := s.openTunnel(c, lease, k)
	if t == nil {
		return dispatch.ReasonError
	}
	defer t.close()
	if reason, ok := t.head(); !ok {
		return reason
	}
	for {
		f, err := t.ts.Recv()
		if err != nil {
			return t.s.failedAfterFirstByte(t.c, &t.cs, &t.w, t.sse, err)
		}
		if reason, done := t.frame(f); done {
			return reason
		}
	}
}

// tunnelExchange is the state of one tunnel relay (see tunnel).
type tunnelExchange struct {
	s         *Server
	c         *gin.Context
	in        *reqInfo
	ts        *dispatch.TunnelStream
	model     string
	start     time.Time
	stopWatch func() bool
	cs        cancelState
	w         deadlineWriter
	stream    bool // the client asked for a stream
	sse       bool // the provider answered with an event stream
	wroteBody bool
}

// openTunnel rewrites the body for the lease's target and opens the tunnel;
// on failure it writes the error response and returns nil.
//
//go:noinline
func (s *Server) openTunnel(c *gin.Context, lease *dispatch.Lease, k *call) *tunnelExchange {
	in := info(c)
	ctx := c.Request.Context()
	start := time.Now()
	body, err := openaiapi.RewriteModel(k.body, lease.Target)
	if err != nil {
		writeError(c, apiError(err, k.model))
		return nil
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
		return nil
	}
	t := &tunnelExchange{s: s, c: c, in: in, ts: ts, model: k.model, start: start, stream: k.stream}
	t.stopWatch = t.cs.watch(ctx, ts)
	return t
}

// close ends the exchange, last thing in tunnel (also on a panic).
func (t *tunnelExchange) close() {
	// Usage frames carry the latest cumulative figures; they are counted
	// once, when the exchange ends.
	t.s.metrics.usage(t.model, t.in.prompt, t.in.completion)
	t.stopWatch()
	closeExchange(&t.cs, t.ts)
}

// head waits (bounded by the response timeout) for the first frame and
// relays the provider's status and headers. When the exchange ends there
// instead, ok is false and reason is the lease's release reason.
//
//go:noinline
func (t *tunnelExchange) head() (reason dispatch.ReleaseReason, ok bool) {
	c := t.c
	limits := t.s.limits.Load()
	wait := time.AfterFunc(time.Duration(limits.ResponseTimeoutSec)*time.Second, func() { t.cs.cancel(t.ts, CancelTimeout) })
	first, err := t.ts.Recv()
	wait.Stop()
	if err == nil && t.cs.get() != "" {
		// Cancelled: frames still in flight are not to be relayed.
		err = context.Canceled
	}
	if err != nil {
		return t.s.failedBeforeFirstByte(c, &t.cs, err, t.model), false
	}
	if first.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS {
		if first.GetKind() == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR {
			writeError(c, openaiapi.FromRunError(first.GetError()))
		} else {
			writeError(c, openaiapi.UpstreamError("The provider answered out of order."))
		}
		return dispatch.ReasonError, false
	}
	h := c.Writer.Header()
	for _, hd := range first.GetHeaders() {
		name := http.CanonicalHeaderKey(hd.GetName())
		if hopHeaders[name] || name == "X-Request-Id" {
			continue
		}
		h.Add(name, hd.GetValue())
		if name == "Content-Type" && strings.HasPrefix(hd.GetValue(), "text/event-stream") {
			t.sse = true
		}
	}
	if t.sse {
		h.Set("X-Accel-Buffering", "no")
	}
	c.Status(int(first.GetStatusCode()))
	c.Writer.WriteHeaderNow()
	t.w = *newDeadlineWriter(c.Writer, time.Duration(limits.WriteTimeoutSec)*time.Second)
	return "", true
}

// frame relays one frame after the first. done reports that the exchange
// ended, with reason as the lease's release reason.
//
//go:noinline
func (t *tunnelExchange) frame(f *iop.ProviderTunnelFrame) (reason dispatch.ReleaseReason, done bool) {
	in := t.in
	switch f.GetKind() {
	case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY:
		if t.cs.get() != "" {
			// Cancelled: body still in flight is not relayed.
			return t.s.failedAfterFirstByte(t.c, &t.cs, &t.w, t.sse, context.Canceled), true
		}
		if !t.wroteBody {
			t.wroteBody = true
			in.ttft = time.Since(t.start)
			t.s.metrics.firstToken(t.model, routeTunnel, in.ttft)
		}
		if _, err := t.w.Write(f.GetBody()); err != nil {
			return t.s.writeFailed(in, &t.cs, t.ts, err), true
		}
		// Streams are flushed frame by frame. A whole (non-streamed) body
		// is left to the response buffer so that its last bytes reach the
		// client only with the end of the response: a client that closes
		// as soon as it has parsed the JSON (SDKs do) would otherwise race
		// the END and USAGE frames and be counted as a client_disconnect,
		// its usage lost.
		if !t.sse && !t.stream {
			return "", false
		}
		if err := t.w.Flush(); err != nil {
			return t.s.writeFailed(in, &t.cs, t.ts, err), true
		}
		if t.sse && bytes.Contains(f.GetBody(), sseDone) {
			// The client has the whole stream and may hang up now (SDKs
			// do); that is not a cancellation. The usage and end frames
			// that follow are still read.
			t.stopWatch()
		}
	case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE:
		u := f.GetUsage()
		in.prompt, in.completion = u.GetPromptTokens(), u.GetCompletionTokens()
	case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_METADATA:
		t.s.logMetadata(in, f)
	case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END:
		return dispatch.ReasonCompleted, true
	case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR:
		return t.s.failedAfterFirstByte(t.c, &t.cs, &t.w, t.sse, errTunnel(f.GetError())), true
	}
	return "", false
}

// logMetadata logs a tunnel's metadata frame (apart from frame, whose own
// frame it would otherwise enlarge).
//
//go:noinline
func (s *Server) logMetadata(in *reqInfo, f *iop.ProviderTunnelFrame) {
	s.log.Debug("tunnel metadata", zap.String("request_id", in.requestID), zap.Any("metadata", f.GetMetadata()))
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
