package nodewire

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// failureKnown reports whether srv remembers failures of key.
func failureKnown(srv *Server, key failureKey) bool {
	srv.failures.mu.Lock()
	defer srv.failures.mu.Unlock()
	return srv.failures.byKey[key] != nil
}

// tryRegister registers nodeID with token from local and returns Dial's
// error.
func tryRegister(t *testing.T, addr, local, nodeID, token string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	req := testRegisterRequest(nodeID)
	req.Token = token
	cc, _, err := Dial(ctx, DialConfig{Address: addr, HandshakeTimeout: waitLong, LocalAddr: local}, req)
	if cc != nil {
		_ = cc.Close()
	}
	return err
}

// An unknown node id is slowed down like a wrong token (guessing ids is
// guessing too), and a successful registration forgets the key's earlier
// failures, so the real node that once mistyped its token is answered at
// once the next time it fails.
func TestFailureDelaysKeyedByUnknownIDsAndForgottenOnSuccess(t *testing.T) {
	h := newFakeHandler()
	h.register = func(_ *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
		switch {
		case req.GetNodeId() != "n1":
			return rejectResponse(iop.RejectCode_REJECT_CODE_UNKNOWN_NODE, "unknown node id")
		case req.GetToken() != "right":
			return rejectResponse(iop.RejectCode_REJECT_CODE_CREDENTIALS, "invalid node token")
		}
		return acceptResponse(req.GetNodeId(), testHeartbeat)
	}
	ts := startServer(t, h, ServerConfig{HandshakeTimeout: 10 * time.Second})

	var rej *RejectedError
	if err := tryRegister(t, ts.addr, "127.0.0.4", "ghost", "x"); !errors.As(err, &rej) || rej.Code != iop.RejectCode_REJECT_CODE_UNKNOWN_NODE {
		t.Fatalf("unknown id: %v", err)
	}
	if !failureKnown(ts.srv, newFailureKey("ghost", "127.0.0.4")) {
		t.Fatal("an unknown-id rejection was not counted as a failure")
	}
	if err := tryRegister(t, ts.addr, "127.0.0.4", "n1", "wrong"); !errors.As(err, &rej) || rej.Code != iop.RejectCode_REJECT_CODE_CREDENTIALS {
		t.Fatalf("wrong token: %v", err)
	}
	k := newFailureKey("n1", "127.0.0.4")
	if !failureKnown(ts.srv, k) {
		t.Fatal("a credentials rejection was not counted as a failure")
	}
	if err := tryRegister(t, ts.addr, "127.0.0.4", "n1", "right"); err != nil {
		t.Fatalf("right token: %v", err)
	}
	if failureKnown(ts.srv, k) {
		t.Fatal("the key's failures are still remembered after it registered")
	}
}

// Closing the server ends a failed-credential delay at once: Close does
// not wait out the delays of connections guessing tokens.
func TestServerCloseCutsFailureDelay(t *testing.T) {
	h := newFakeHandler()
	h.register = func(*Conn, *iop.RegisterRequest) *iop.RegisterResponse {
		return rejectResponse(iop.RejectCode_REJECT_CODE_CREDENTIALS, "invalid node token")
	}
	ts := startServer(t, h, ServerConfig{HandshakeTimeout: time.Minute})
	k := newFailureKey("n1", "127.0.0.5")
	for ts.srv.failures.fail(k) < failureMaxDelay {
	}
	raw, err := net.DialTCP("tcp", &net.TCPAddr{IP: net.ParseIP("127.0.0.5")}, mustResolve(t, ts.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := writeRegister(raw, testRegisterRequest("n1")); err != nil {
		t.Fatal(err)
	}
	await(t, h.registered, "the registration") // the server is in its delay (or about to be)
	start := time.Now()
	ts.close(t)
	if took := time.Since(start); took >= failureMaxDelay/2 {
		t.Fatalf("Close took %s: it waited out the %s failure delay", took, failureMaxDelay)
	}
}

func mustResolve(t *testing.T, addr string) *net.TCPAddr {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// writeRegister writes the preface and req as a node's first bytes.
func writeRegister(w io.Writer, req *iop.RegisterRequest) error {
	if _, err := w.Write(preface[:]); err != nil {
		return err
	}
	return WriteFrame(w, &iop.Envelope{Body: &iop.Envelope_RegisterRequest{RegisterRequest: req}}, maxRegisterFrame)
}
