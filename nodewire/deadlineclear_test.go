package nodewire

import (
	"context"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The handshake's deadlines end with the handshake: a node whose
// handshake timeout is short keeps its connection, and a handler keeps
// reading its stream, long past it.
func TestHandshakeDeadlinesEndWithHandshake(t *testing.T) {
	const hs = 200 * time.Millisecond
	h := newFakeHandler()
	h.register = func(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
		return acceptResponse(req.GetNodeId(), &iop.HeartbeatConfig{IntervalMs: 20, TimeoutMs: 60_000})
	}
	ts := startServer(t, h, ServerConfig{})
	cc, _ := dial(t, DialConfig{Address: ts.addr, HandshakeTimeout: hs}, "n1")
	sc := recvConn(t, h.registered, "Register")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := cc.Ready(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		defer st.CloseWrite()
		_, err := st.Recv()
		second <- err
	})
	st, err := sc.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	if err := st.Send(runRequest("r1")); err != nil {
		t.Fatal(err)
	}
	// Heartbeats spanning several handshake timeouts: time has passed on
	// the node's clock (20 ms apart; the count is of the edge's).
	waitFor(t, "heartbeats past the handshake timeout", func() bool {
		return cc.Stats().HeartbeatsReceived >= uint64(4*hs/(20*time.Millisecond))
	})
	if err := st.Send(runRequest("r1")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-second:
		if err != nil {
			t.Fatalf("the handler's second read, past the handshake timeout: %v", err)
		}
	case <-time.After(waitLong):
		t.Fatal("the handler's second read did not return")
	}
	if cc.IsClosed() {
		t.Fatalf("node connection closed past its handshake timeout: %v", cc.Err())
	}
}
