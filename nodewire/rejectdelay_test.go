package nodewire

import (
	"context"
	"errors"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A failed-credential delay longer than what is left of the handshake
// deadline still leaves time to write the rejection: the node sees a fatal
// REJECT_CODE_CREDENTIALS, not a connection closed without an answer
// (which it would retry as a network failure).
func TestFailedCredentialDelayLeavesTimeForTheRejection(t *testing.T) {
	h := newFakeHandler()
	h.register = func(*Conn, *iop.RegisterRequest) *iop.RegisterResponse {
		return rejectResponse(iop.RejectCode_REJECT_CODE_CREDENTIALS, "invalid node token")
	}
	const handshake = 2 * time.Second
	ts := startServer(t, h, ServerConfig{HandshakeTimeout: handshake})
	// Earlier failures of this id from this source: the next delay is
	// failureMaxDelay, longer than the whole handshake.
	k := newFailureKey("n1", "127.0.0.3")
	for ts.srv.failures.fail(k) < handshake {
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cc, _, err := Dial(ctx, DialConfig{Address: ts.addr, HandshakeTimeout: waitLong, LocalAddr: "127.0.0.3"}, testRegisterRequest("n1"))
	if cc != nil {
		_ = cc.Close()
	}
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Code != iop.RejectCode_REJECT_CODE_CREDENTIALS {
		t.Fatalf("Dial: %v, want the credentials rejection", err)
	}
}
