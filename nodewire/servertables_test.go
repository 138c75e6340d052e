package nodewire

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The per-source count of pending handshakes forgets a source once none of
// its connections is pending: the table holds only sources in the
// registration, not every address that ever connected.
func TestPendingPerSourceForgetsFinishedSources(t *testing.T) {
	h := newFakeHandler()
	h.register = func(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
		if req.GetNodeId() == "refused" {
			return rejectResponse(iop.RejectCode_REJECT_CODE_UNAVAILABLE, "full")
		}
		return acceptResponse(req.GetNodeId(), testHeartbeat)
	}
	ts := startServer(t, h, ServerConfig{})
	readyPair(t, ts, "n1")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, _, err := Dial(ctx, DialConfig{Address: ts.addr}, testRegisterRequest("refused")); err == nil {
		t.Fatal("a refused registration dialled")
	}
	waitFor(t, "the per-source table to empty", func() bool {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		return len(ts.srv.perSrc) == 0 && ts.srv.pending == 0
	})
}

// A node that registers after failed attempts is forgotten by the
// failed-credential delays: its next mistake starts again from the first
// delay, not from where the guessing left off.
func TestSuccessfulRegistrationForgetsFailures(t *testing.T) {
	h := newFakeHandler()
	h.register = func(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
		if req.GetToken() != "secret-token" {
			return rejectResponse(iop.RejectCode_REJECT_CODE_CREDENTIALS, "bad token")
		}
		return acceptResponse(req.GetNodeId(), testHeartbeat)
	}
	ts := startServer(t, h, ServerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	bad := testRegisterRequest("n1")
	bad.Token = "wrong"
	var rej *RejectedError
	if _, _, err := Dial(ctx, DialConfig{Address: ts.addr}, bad); !errors.As(err, &rej) {
		t.Fatalf("wrong token: %v, want a refusal", err)
	}
	if n := failureKeys(ts.srv); n != 1 {
		t.Fatalf("%d failure entries after a refusal, want 1", n)
	}
	dial(t, DialConfig{Address: ts.addr}, "n1")
	if n := failureKeys(ts.srv); n != 0 {
		t.Fatalf("%d failure entries after the node registered, want 0", n)
	}
}

func failureKeys(s *Server) int {
	s.failures.mu.Lock()
	defer s.failures.mu.Unlock()
	return len(s.failures.byKey)
}

// A listener closed under a running Serve (not by Server.Close) ends
// Serve with an error at once, rather than being retried as a passing
// accept failure.
func TestServeReturnsWhenListenerClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(ServerConfig{Handler: newFakeHandler()})
	t.Cleanup(func() { _ = srv.Close() })
	res := make(chan error, 1)
	go func() { res <- srv.Serve(ln) }() // Owner: the test; ends when Serve returns.
	_ = ln.Close()
	select {
	case err := <-res:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Serve returned %v, want net.ErrClosed", err)
		}
	case <-time.After(waitLong):
		t.Fatalf("Serve still running %v after its listener closed", waitLong)
	}
}
