package nodewire

import (
	"errors"
	"fmt"
	"strings"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

var (
	// ErrClosed is returned by operations on a closed connection.
	ErrClosed = errors.New("nodewire: connection closed")
	// ErrHeartbeatTimeout is the close cause when the peer sent nothing on
	// the control stream for the heartbeat timeout.
	ErrHeartbeatTimeout = errors.New("nodewire: heartbeat timeout")
	// ErrBadPreface is returned when a peer does not open with the iop preface.
	ErrBadPreface = errors.New("nodewire: bad preface")
	// ErrProtocol is returned when a peer sends a message out of place.
	ErrProtocol = errors.New("nodewire: protocol violation")
	// ErrEncode is returned when a message cannot be encoded (e.g. a string
	// field that is not valid UTF-8): the message is at fault, not the
	// connection.
	ErrEncode = errors.New("nodewire: cannot encode message")
	// ErrNotReady is returned by Client.Ready when the Edge answered
	// ready=false: the session must be closed and a new one dialed.
	ErrNotReady = errors.New("nodewire: ready refused")
	// ErrStreamCut is returned by every send on a stream after a write
	// failed part-way through a frame: the peer would read the next frame
	// as the rest of that one.
	ErrStreamCut = errors.New("nodewire: stream cut mid-frame")
	// ErrDone is returned by a read or write on a stream that would have
	// waited, or would wait on, after the channel given to Stream.SetDone
	// closed: its owner gave up on the exchange (the edge: its client
	// went away). The stream itself is unchanged.
	ErrDone = errors.New("nodewire: stream's owner done")
)

// RejectedError is a registration the Edge refused.
type RejectedError struct {
	Code   iop.RejectCode
	Reason string
}

// maxReasonBytes bounds the reason a node keeps of an edge's refusal: it
// is logged (and may be shown), and the edge's answer may be up to a
// frame's size.
const maxReasonBytes = 1 << 10

// boundReason is reason cut to maxReasonBytes, whole UTF-8 only.
func boundReason(reason string) string { return boundText(reason, maxReasonBytes) }

// maxLoggedNodeID bounds a node id the edge logs before the registration
// is accepted: until then it is the peer's own text, up to a registration
// frame's size.
const maxLoggedNodeID = 128

// LoggableNodeID is a node id a peer sent, before it is known to be a
// configured one, cut for a log line: up to maxLoggedNodeID bytes, marked
// as cut. (zap escapes control characters; the cut bounds the line.)
func LoggableNodeID(id string) string { return boundText(id, maxLoggedNodeID) }

// boundText is s cut to n bytes, whole UTF-8 only, marked as cut.
func boundText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("nodewire: registration rejected (%s): %s", e.Code, e.Reason)
}

// Fatal reports whether retrying cannot help: the Node's own credentials,
// identity or protocol version are wrong.
func (e *RejectedError) Fatal() bool {
	switch e.Code {
	case iop.RejectCode_REJECT_CODE_CREDENTIALS,
		iop.RejectCode_REJECT_CODE_UNKNOWN_NODE,
		iop.RejectCode_REJECT_CODE_PROTOCOL_VERSION:
		return true
	}
	return false
}
