package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
	"golang.org/x/net/http/httpguts"

	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway/openaiapi"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Messages of the timeouts' errors.
const (
	msgNoAnswer = "The provider did not answer in time."
	msgIdle     = "The provider stopped sending for longer than the stream idle timeout."
	// msgOutOfOrder: the node broke the tunnel's frame order.
	msgOutOfOrder = "The provider answered out of order."
)

// maxHeldBody bounds the whole (non-streamed) answer the relay holds until
// its END; a larger one is relayed as it comes.
const maxHeldBody = 16 << 20

// tunnel relays a raw provider exchange: status and headers, then each body
// frame written and flushed the moment it arrives (a whole, non-streamed
// answer is held until its END, see head). It releases the lease.
//
// A held stream parks its handler goroutine here, in ts.RecvBy, under
// net/http, gin and the middlewares, for as long as the stream lasts. So
// this frame (and those above it) is kept small: the setup, the first
// frame and each later frame are handled in separate calls, and the
// exchange's state lives in one heap object. Otherwise the goroutine's
// stack outgrows 8 KB on its first write to the client and, still using
// more than a quarter of 16 KB while parked, is never shrunk back: 8 KB
// more per held stream. Taking only what the relay needs from k also lets
// the request body and the parsed request be collected once sent.
func (s *Server) tunnel(c *gin.Context, lease *dispatch.Lease, k *call) {
	t := &tunnelExchange{s: s, c: c, lease: lease, reason: dispatch.ReasonError}
	defer t.close()
	if !t.open(k) || !t.head() {
		return
	}
	for {
		if t.fb.held > 0 && !t.flushBeforeWait() {
			return
		}
		f, err := t.recvBy(t.idleDeadline())
		if err != nil {
			t.reason = t.failed(err)
			return
		}
		if reason, done := t.frame(f); done {
			t.reason = reason
			return
		}
	}
}

// tunnelExchange is the state of one tunnel relay (see tunnel).
type tunnelExchange struct {
	s  *Server
	c  *gin.Context
	in *reqInfo
	// k is the call relayed; its model (k.model) names the request in
	// metrics. Not copied here: a tunnelExchange lives as long as its
	// stream, and 288 B is a size class where 304 took 320.
	k         *call
	lease     *dispatch.Lease
	ts        *dispatch.TunnelStream
	start     time.Time
	deadline  time.Time     // the response timeout: the first frame by then
	idle      time.Duration // limits.stream_idle_timeout_sec; 0: none
	cs        cancelState
	w         deadlineWriter
	fb        flushBatch             // a stream's chunks written but not yet flushed
	done      doneScan               // an event stream's [DONE], across BODY frames
	reason    dispatch.ReleaseReason // the lease's release reason (also on a panic)
	stream    bool                   // the client asked for a stream
	sse       bool                   // the provider answered with an event stream
	wroteBody bool
	// doneSent: the event stream's [DONE] went to the client, which has
	// its whole answer; what follows (usage, the END) is the edge's.
	doneSent bool
	// A whole answer held until END (see head), and the body so far.
	// Nothing has been written to the client while hold is set.
	hold bool
	// noBody: the status forbids a body (bodyAllowed); the answer is
	// held and whatever body comes is dropped.
	noBody bool
	// status is the provider's status frame from head until the head is
	// written (writeHead clears it); a held answer's, until its END.
	status *iop.ProviderTunnelFrame
	body   []byte
	// ids looks for the answer's id in a /v1/responses answer relayed as
	// it comes (see scanID); nil for every other exchange, and once found.
	ids *responseIDScan
}

// open rewrites the body for the lease's target and opens the tunnel; on
// failure it writes the error response and returns false.
//
//go:noinline
func (t *tunnelExchange) open(k *call) bool {
	c, lease := t.c, t.lease
	t.in = info(c)
	// The figures close counts are this exchange's own: an attempt that
	// failed over after its USAGE frame counted that one already.
	t.in.prompt, t.in.completion = 0, 0
	t.stream, t.k = k.stream, k
	ctx := c.Request.Context()
	t.start = time.Now()
	limits := t.s.limits.Load()
	t.deadline = t.start.Add(time.Duration(limits.ResponseTimeoutSec) * time.Second)
	t.idle = limits.StreamIdleTimeout()
	t.w = deadlineWriter{w: c.Writer, rc: *http.NewResponseController(c.Writer), timeout: time.Duration(limits.WriteTimeoutSec) * time.Second}
	// k.body was validated when the call was built (Parse*, or encoded here).
	body, err := k.tunnelBody()
	if err != nil {
		writeError(c, openaiapi.InternalError("The request could not be converted."))
		return false
	}
	body, err = openaiapi.RewriteValidModel(body, lease.Target)
	if err != nil {
		writeError(c, apiError(err, k.model))
		return false
	}
	path := k.path
	if q := c.Request.URL.RawQuery; q != "" {
		path += "?" + q
	}
	// Sending the request counts against the response timeout too: a node
	// that grants no window for a large body is cut off with the rest.
	ts, err := lease.OpenTunnel(ctx, t.deadline, &iop.ProviderTunnelRequest{
		RunId: newID("run_"), Method: http.MethodPost, Path: path, Headers: forwardHeaders(c.Request.Header),
		Body: body, Stream: k.stream, SessionId: lease.SessionID,
		Metadata: wireMetadata(ctx, t.in.requestID),
	})
	if err != nil {
		if ctx.Err() == nil && t.s.failoverErr(c, k, lease, &t.cs, err) {
			return false // the lease goes back as an error; the next attempt answers
		}
		t.reason = t.s.openFailed(c, err, k.model)
		return false
	}
	t.ts = ts
	ts.SetDone(ctx.Done()) // the client gone: see recvBy
	return true
}

// recvBy is the exchange's next frame (ts.RecvBy). The client's going
// away while the relay waits (its request context's Done, given to the
// stream at open) cancels the exchange upstream as client_disconnect and
// reads as that cancellation (clientGone).
func (t *tunnelExchange) recvBy(deadline time.Time) (*iop.ProviderTunnelFrame, error) {
	f, err := t.ts.RecvBy(deadline)
	return f, t.cs.clientGone(t.ts, err)
}

// openFailed answers a run or tunnel that could not be sent: the client
// went away (nothing to answer), the response timeout passed while the
// node took no request bytes, or the node failed.
func (s *Server) openFailed(c *gin.Context, err error, model string) dispatch.ReleaseReason {
	switch {
	case c.Request.Context().Err() != nil:
		c.Abort()
		return s.cancelled(info(c), CancelClientDisconnect)
	case errors.Is(err, context.DeadlineExceeded):
		writeError(c, openaiapi.UpstreamError(msgNoAnswer))
		return s.cancelled(info(c), CancelTimeout)
	}
	writeError(c, apiError(err, model))
	return dispatch.ReasonError
}

// close ends the exchange and hands the lease back (see Finish), last
// thing in tunnel (also on a panic).
func (t *tunnelExchange) close() {
	if t.ts == nil {
		t.lease.Release(t.reason)
		return
	}
	if t.fb.take() {
		// Chunks written while their successors were already here: they
		// reach the client before Finish, which may wait for the node.
		_ = t.w.Flush()
	}
	// Usage frames carry the latest cumulative figures; they are counted
	// once, when the exchange ends.
	t.s.metrics.usage(t.k.model, t.in.prompt, t.in.completion)
	t.ts.Finish(t.lease, t.reason, t.cs.get(), t.lease.CancelGrace)
}

// flushBeforeWait flushes the chunks written while their successors were
// already here, unless the next frame has arrived too (flushBatch); false
// when the client's connection failed, with the exchange ended. Apart from
// tunnel so that the frame parked under a held stream stays small.
//
//go:noinline
func (t *tunnelExchange) flushBeforeWait() bool {
	if !t.fb.beforeWait(t.ts) {
		return true
	}
	if err := t.w.Flush(); err != nil {
		t.reason = t.s.writeFailed(t.in, &t.cs, t.ts, err)
		return false
	}
	return true
}

// idleDeadline bounds the wait for the next frame once the answer has
// started: limits.stream_idle_timeout_sec from now (zero: none).
func (t *tunnelExchange) idleDeadline() time.Time {
	if t.idle <= 0 {
		return time.Time{}
	}
	return time.Now().Add(t.idle)
}

// head waits (bounded by the response timeout) for the first frame and
// checks the provider's status and headers. It relays them at once, except
// for a whole answer (no event stream, and either not asked as a stream or
// an error status), which is held until its END: a body cut short then
// becomes a proper 502 instead of a truncated reply, and an error body can
// be normalized. When the exchange ends here instead, it returns false
// with the error answered.
//
//go:noinline
func (t *tunnelExchange) head() bool {
	c := t.c
	first, err := t.recvBy(t.deadline)
	if errors.Is(err, dispatch.ErrRecvTimeout) {
		// The CancelRequest goes out in Finish, after the answer.
		t.cs.record(CancelTimeout)
	}
	if err == nil && t.cs.get() != "" {
		// Cancelled: frames still in flight are not to be relayed.
		err = context.Canceled
	}
	if err != nil {
		if t.s.failoverErr(c, t.k, t.lease, &t.cs, err) {
			return false
		}
		t.reason = t.s.failedBeforeFirstByte(c, &t.cs, err, t.k.model)
		return false
	}
	if first.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS {
		if first.GetKind() == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR {
			if why := retryableRun(first.GetError()); why != "" && t.s.failover(c, t.k, t.lease, why) {
				return false
			}
			writeError(c, openaiapi.FromRunError(first.GetError()))
		} else {
			writeError(c, openaiapi.UpstreamError(msgOutOfOrder))
		}
		return false
	}
	if problem := checkHead(first); problem != "" {
		t.refused(problem)
		writeError(c, openaiapi.UpstreamError("The provider's answer could not be relayed ("+problem+")."))
		return false
	}
	t.status = first
	// The first Content-Type fit to relay, the one copyHeaders relays (an
	// unfit one before it is dropped there, so judging by it would treat
	// the relayed type's body as the other kind); a media type's name is
	// case-insensitive.
	for _, hd := range first.GetHeaders() {
		if strings.EqualFold(hd.GetName(), "Content-Type") && httpguts.ValidHeaderFieldValue(hd.GetValue()) {
			v := hd.GetValue()
			t.sse = len(v) >= len(sseType) && strings.EqualFold(v[:len(sseType)], sseType)
			break
		}
	}
	// Whatever its media type: an unavailable backend's event stream has
	// not reached the client either.
	if retryableStatus(int(first.GetStatusCode())) && t.s.failover(c, t.k, t.lease, failoverUnavailable) {
		return false // its body is not read: Finish resets the stream
	}
	// An answer whose status forbids a body (204, 304) is held too, so
	// that a body its upstream sent anyway is dropped rather than written
	// into a failed write (a write_error the client never caused).
	t.noBody = !bodyAllowed(int(first.GetStatusCode()))
	t.hold = !t.sse && (!t.stream || first.GetStatusCode() >= 400) || t.noBody
	if !t.hold {
		t.watchID(int(first.GetStatusCode()))
		t.writeHead(int(first.GetStatusCode()))
		t.k.answered()
	}
	return true
}

// watchID starts looking for the id of a successful /v1/responses answer
// of status that is relayed as it comes.
func (t *tunnelExchange) watchID(status int) {
	if t.k.op == opResponses && status >= 200 && status < 300 {
		t.ids = newResponseIDScan(t.sse)
	}
}

// scanID feeds what is about to be relayed to the id scan (last: the
// answer ends with it); once it has the answer's id, the provider is
// remembered as the one holding that response, for the follow-ups that
// name it (previous_response_id). shared is RememberResponse's: what
// carries the id waits for it before it is written (AwaitShared).
//
//go:noinline
func (t *tunnelExchange) scanID(p []byte, last bool) (shared <-chan struct{}) {
	id, done := t.ids.feed(p)
	if !done {
		if !last {
			return nil
		}
		id = t.ids.end()
	}
	t.ids = nil
	if id == "" {
		return nil
	}
	return t.s.d.RememberResponse(id, t.lease)
}

// refused logs why the node's answer is not relayed (apart from head and
// frame, whose frames its fields would otherwise enlarge).
//
//go:noinline
func (t *tunnelExchange) refused(problem string) {
	t.s.log.Warn("tunnel answer refused", zap.String("request_id", t.in.requestID), zap.String("node_id", t.lease.NodeID),
		zap.String("provider", t.lease.ProviderID), zap.String("problem", problem))
}

// writeHead relays the provider's headers with status.
func (t *tunnelExchange) writeHead(status int) {
	t.copyHeaders()
	// Written: nothing reads the status frame again, and a stream may be
	// held open for minutes after it.
	t.status = nil
	if t.sse {
		setNoBuffering(t.c.Writer.Header())
	}
	t.c.Status(status)
	t.c.Writer.WriteHeaderNow()
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
			return t.failed(context.Canceled), true
		}
		if !t.wroteBody {
			t.wroteBody = true
			// Once per request (as a run's firstToken): a held answer
			// cut short may have counted it before failover.
			if in.ttft == 0 {
				in.ttft = time.Since(t.start)
				t.s.metrics.firstToken(t.k.model, routeTunnel, in.ttft)
			}
		}
		if t.hold {
			if t.noBody {
				return "", false
			}
			if len(t.body)+len(f.GetBody()) <= maxHeldBody {
				// A copy: a BODY frame is only lent until the next
				// RecvBy.
				t.body = append(t.body, f.GetBody()...)
				return "", false
			}
			// Too large to hold: relay the rest as it comes.
			t.hold = false
			t.watchID(int(t.status.GetStatusCode()))
			t.writeHead(int(t.status.GetStatusCode()))
			held := t.body
			t.body = nil
			if t.ids != nil {
				t.s.d.AwaitShared(t.c.Request.Context(), t.scanID(held, false))
			}
			if err := t.w.writeWhole(held); err != nil {
				return t.s.writeFailed(in, &t.cs, t.ts, err), true
			}
		}
		// Scanned before it is written, and written once the id is in
		// Redis (cluster mode): a client never holds an id another edge
		// could not look up. A stream's id is in its first event, so the
		// wait (one Redis round trip) falls before the first token.
		if t.ids != nil {
			t.s.d.AwaitShared(t.c.Request.Context(), t.scanID(f.GetBody(), false))
		}
		if _, err := t.w.Write(f.GetBody()); err != nil {
			return t.s.writeFailed(in, &t.cs, t.ts, err), true
		}
		if answeredEarly(t.c.Writer) {
			// The client has its whole answer (earlyAnswerer): the rest
			// of the body is dropped, and Finish cancels the exchange as
			// abandoned.
			return dispatch.ReasonCompleted, true
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
		// A stream's chunk is flushed at once unless the next frame has
		// already arrived; then they leave together (flushBatch). [DONE]
		// goes at once: the client has the whole stream and may hang up
		// (SDKs do), which is not a cancellation. The usage and end frames
		// that follow are still read.
		doneEvent := t.sse && t.done.seen(f.GetBody())
		if doneEvent {
			// Before the flush: a client that hangs up as soon as it has
			// [DONE] is not a cancellation (recvBy).
			t.ts.SetDone(nil)
			// The event itself, ended by its line break, not the same
			// bytes inside a chunk's JSON text (where a line break is
			// escaped): a model that writes "data: [DONE]" has not ended
			// its stream.
			if doneLine(f.GetBody()) {
				t.doneSent = true
				// No longer watched for the client, the wait for the END
				// behind [DONE] is bounded by the node's cancel grace,
				// whatever the idle timeout (0: none).
				if grace := t.lease.CancelGrace; t.idle <= 0 || t.idle > grace {
					t.idle = grace
				}
			}
		}
		if !t.fb.afterWrite(t.ts, doneEvent) {
			return "", false
		}
		if err := t.w.Flush(); err != nil {
			return t.s.writeFailed(in, &t.cs, t.ts, err), true
		}
	case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE:
		u := f.GetUsage()
		in.prompt, in.completion = u.GetPromptTokens(), u.GetCompletionTokens()
	case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_METADATA:
		t.s.logMetadata(in, f)
	case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END:
		if t.hold {
			return t.writeHeld(), true
		}
		if t.ids != nil {
			// A whole answer relayed as it came (not an event stream)
			// whose beginning did not reach the scan's bound.
			t.scanID(nil, true)
		}
		return dispatch.ReasonCompleted, true
	case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR:
		return t.failed(errTunnel(f.GetError())), true
	case iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS:
		// First and exactly once (runtime.proto): a second one starts
		// another answer (a node that retried after part of the first),
		// which joined to the first would reach the client as one.
		t.refused("second status frame")
		return t.failed(errOutOfOrder), true
	}
	return "", false
}

// errOutOfOrder fails a tunnel whose node sent a frame the protocol does
// not allow where it came. Not a reason to fail over: the node is broken,
// not the backend busy, and its answer is not to be trusted either way.
var errOutOfOrder = fmt.Errorf("gateway: tunnel frame out of order: %w", nodewire.ErrProtocol)

// writeHeld answers with the whole held response once its END arrived. An
// error answer is normalized to the OpenAI envelope (upstream 401/403
// become 502: the node's provider key failed, not the client's).
//
//go:noinline
func (t *tunnelExchange) writeHeld() dispatch.ReleaseReason {
	status, body := int(t.status.GetStatusCode()), t.body
	t.body = nil
	t.copyHeaders()
	h := t.c.Writer.Header()
	if status >= 400 {
		ns, nb := openaiapi.NormalizeUpstreamError(status, h.Get("Content-Type"), body)
		if ns != status || !bytes.Equal(nb, body) {
			h.Set("Content-Type", "application/json")
			h.Del("Content-Encoding")
			if ns != status {
				h.Del("Www-Authenticate")
			}
			status, body = ns, nb
		}
	}
	if !bodyAllowed(status) {
		t.c.Status(status)
		t.c.Writer.WriteHeaderNow()
		return dispatch.ReasonCompleted
	}
	// A Responses answer's id is shared with the other edges before the
	// client has the answer: a follow-up it sends at once through another
	// edge finds it there (bounded by the ledger's timeout; no wait while
	// Redis is down).
	if t.watchID(status); t.ids != nil {
		t.s.d.AwaitShared(t.c.Request.Context(), t.scanID(body, true))
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	t.c.Status(status)
	t.c.Writer.WriteHeaderNow()
	if err := t.w.writeWhole(body); err != nil {
		return t.s.writeFailed(t.in, &t.cs, t.ts, err)
	}
	return dispatch.ReasonCompleted
}

// failed ends an exchange whose next frame did not come: the node failed
// or sent an ERROR frame, the client left, or the stream went silent for
// longer than the stream idle timeout.
//
//go:noinline
func (t *tunnelExchange) failed(err error) dispatch.ReleaseReason {
	if t.doneSent {
		// The client has its whole answer: nothing is written after its
		// [DONE] and the request is not counted as failed. An exchange
		// still open is cancelled as abandoned by Finish.
		t.s.log.Debug("tunnel ended after [DONE] without its END", zap.String("request_id", t.in.requestID),
			zap.String("node_id", t.lease.NodeID), zap.String("provider", t.lease.ProviderID), zap.Error(err))
		return dispatch.ReasonCompleted
	}
	if errors.Is(err, dispatch.ErrRecvTimeout) {
		// The CancelRequest goes out in Finish, after the error event.
		t.cs.record(CancelTimeout)
		if t.cs.get() == CancelTimeout {
			return t.idleTimedOut()
		}
	}
	if t.hold {
		// Nothing was written yet: another candidate may still answer.
		if !errors.Is(err, errOutOfOrder) && t.s.failoverErr(t.c, t.k, t.lease, &t.cs, err) {
			return dispatch.ReasonError
		}
		// A cut body is a 502, never a truncated reply.
		switch {
		case t.cs.get() != "":
		case errors.Is(err, errOutOfOrder):
			err = openaiapi.UpstreamError(msgOutOfOrder)
		default:
			err = openaiapi.UpstreamError("The provider's answer ended before it was complete.")
		}
		return t.s.failedBeforeFirstByte(t.c, &t.cs, err, t.k.model)
	}
	t.reason = dispatch.ReasonError // for the abort below
	return t.s.failedAfterFirstByte(t.c, &t.cs, &t.w, t.sse, err)
}

// idleTimedOut ends a started answer after the stream idle timeout (the
// upstream is cancelled right after, by Finish): an SSE error event, a 502 for a held
// answer, an aborted connection for any other body. Never a clean end.
func (t *tunnelExchange) idleTimedOut() dispatch.ReleaseReason {
	reason := t.s.cancelled(t.in, CancelTimeout)
	e := openaiapi.UpstreamError(msgIdle)
	switch {
	case t.hold:
		writeError(t.c, e)
	case t.sse:
		_, _ = t.w.Write(openaiapi.SSEErrorEvent(e))
		_ = t.w.Flush()
	default:
		t.reason = reason
		panic(http.ErrAbortHandler)
	}
	return reason
}

// logMetadata logs a tunnel's metadata frame (apart from frame, whose own
// frame it would otherwise enlarge).
//
//go:noinline
func (s *Server) logMetadata(in *reqInfo, f *iop.ProviderTunnelFrame) {
	s.log.Debug("tunnel metadata", zap.String("request_id", in.requestID), zap.Any("metadata", f.GetMetadata()))
}

// sseType is the media type of an event stream.
