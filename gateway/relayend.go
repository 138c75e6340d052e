package gateway

import (
	"errors"
	"net/http"
	"os"
	"syscall"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// How a relay ends when it cannot complete: the client gone, a failed
// write, or a failure before or after the first byte of the answer.

type tunnelError struct{ re *iop.RunError }

func (e tunnelError) Error() string {
	return "gateway: tunnel error: " + e.re.GetCode().String() + ": " + e.re.GetMessage()
}

func errTunnel(re *iop.RunError) error { return tunnelError{re: re} }

// writeFailed ends an exchange whose write to the client failed. A write
// the client's close or reset broke is the client leaving
// (client_disconnect, as when the relay's wait sees it first); a write
// that ran into the write deadline is the client stalling, write_error,
// even when net/http, seeing that failed write, has already cancelled the
// request context (which the relay's wait records as client_disconnect);
// any other failure (a Messages conversion's bound) is write_error unless
// a reason was recorded before it.
func (s *Server) writeFailed(in *reqInfo, cs *cancelState, x canceller, err error) dispatch.ReleaseReason {
	first := CancelWriteError
	if clientLeft(err) {
		first = CancelClientDisconnect
	}
	cs.cancel(x, first)
	reason := cs.get()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		reason = CancelWriteError
	}
	return s.cancelled(in, reason)
}

// clientLeft reports a write error that is the peer's close or reset of
// the connection: EPIPE or ECONNRESET, or on Windows, whose sockets
// report neither, WSAECONNRESET or WSAECONNABORTED (peerGoneErrnos).
func clientLeft(err error) bool { return clientLeftOn(err, peerGoneErrnos) }

// clientLeftOn is clientLeft on a platform whose further errnos for a
// connection the peer reset or aborted are errnos.
func clientLeftOn(err error, errnos []syscall.Errno) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || isErrno(err, errnos)
}

// windowsPeerGone are Windows Sockets' errors for a connection the peer
// reset (WSAECONNRESET, 10054) or the local stack aborted after a failed
// send or a timeout (WSAECONNABORTED, 10053), as winsock2.h numbers
// them; Windows reports neither as syscall.ECONNRESET (an errno package
// syscall invents there, which no socket returns). Numbers here, not
// package syscall's names, which exist on Windows only: the
// classification is tested on every platform.
var windowsPeerGone = []syscall.Errno{10054, 10053}

// isErrno reports whether err wraps one of errnos.
func isErrno(err error, errnos []syscall.Errno) bool {
	if len(errnos) == 0 {
		return false
	}
	var en syscall.Errno
	if !errors.As(err, &en) {
		return false
	}
	for _, e := range errnos {
		if en == e {
			return true
		}
	}
	return false
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
			writeError(c, openaiapi.UpstreamError(msgNoAnswer))
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
		if reason == CancelTimeout {
			info(c).outcome = http.StatusBadGateway // the stream went silent: a provider failure
		}
		return s.cancelled(info(c), reason)
	}
	info(c).outcome = http.StatusBadGateway
	if sse {
		msg := "The provider stream failed."
		var te tunnelError
		if errors.As(err, &te) && te.re.GetMessage() != "" {
			msg = te.re.GetMessage()
		}
		_, _ = w.Write(openaiapi.SSEErrorEvent(openaiapi.UpstreamError(msg)))
		_ = w.Flush()
		return dispatch.ReasonError
	}
	panic(http.ErrAbortHandler)
}
