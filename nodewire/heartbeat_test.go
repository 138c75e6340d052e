package nodewire

import (
	"context"
	"errors"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A path that goes silent (both sockets open, nothing forwarded) is detected
// by heartbeats on both sides within the configured timeout.
func TestHeartbeatTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	h := newFakeHandler()
	h.register = func(_ *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
		return acceptResponse(req.GetNodeId(), &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: uint32(timeout / time.Millisecond)})
	}
	ts := startServer(t, h, ServerConfig{})
	px := startProxy(t, ts.addr)

	cc, sc := readyPairVia(t, px.Addr(), h, "node-1")
	serveRes := serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		_ = st.CloseWrite()
	})
	waitFor(t, "heartbeats through the proxy", func() bool {
		if sc.Err() != nil || cc.Err() != nil {
			t.Fatalf("connection closed before the freeze: server %v, client %v", sc.Err(), cc.Err())
		}
		return cc.Stats().HeartbeatsReceived >= 2 && sc.Stats().HeartbeatsReceived >= 2
	})

	px.Freeze()
	frozenAt := time.Now()
	within := timeout + time.Second
	waitDone(t, sc, within, "server conn after the path froze")
	if el := time.Since(frozenAt); el < timeout/2 {
		t.Fatalf("server gave up %v after the freeze, well before the %v timeout", el, timeout)
	}
	if !errors.Is(sc.Err(), ErrHeartbeatTimeout) {
		t.Fatalf("server Err = %v, want ErrHeartbeatTimeout", sc.Err())
	}
	call := recvClosed(t, h)
	if call.c != sc || !errors.Is(call.err, ErrHeartbeatTimeout) {
		t.Fatalf("Closed cause %v, want ErrHeartbeatTimeout", call.err)
	}
	// The Node cannot see the Edge's close through the frozen path: its own
	// heartbeat timeout ends the connection.
	waitDone(t, cc.Conn, within, "client conn after the path froze")
	if !errors.Is(cc.Err(), ErrHeartbeatTimeout) {
		t.Fatalf("client Err = %v, want ErrHeartbeatTimeout", cc.Err())
	}
	// The Node's Serve reports the same cause.
	select {
	case err := <-serveRes:
		if !errors.Is(err, ErrHeartbeatTimeout) {
			t.Fatalf("ClientConn.Serve = %v, want ErrHeartbeatTimeout", err)
		}
	case <-time.After(waitLong):
		t.Fatal("ClientConn.Serve did not return after the heartbeat timeout")
	}
	ts.close(t)
	if _, _, closed := h.counts(); closed != 1 {
		t.Fatalf("Closed called %d times, want 1", closed)
	}
}

// Heartbeats keep a quiet but healthy connection open well past the timeout.
func TestHeartbeatKeepsIdleConnOpen(t *testing.T) {
	h := newFakeHandler()
	h.register = func(_ *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
		return acceptResponse(req.GetNodeId(), &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 1000})
	}
	ts := startServer(t, h, ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")
	// 50 heartbeats each way take 2.5s: the data path stays silent for more
	// than two heartbeat timeouts.
	waitFor(t, "50 heartbeats each way", func() bool {
		return cc.Stats().HeartbeatsReceived >= 50 && sc.Stats().HeartbeatsReceived >= 50
	})
	if sc.Err() != nil || cc.Err() != nil {
		t.Fatalf("idle connection closed: server %v, client %v", sc.Err(), cc.Err())
	}
}

func TestHeartbeatDurations(t *testing.T) {
	cases := []struct {
		cfg               *iop.HeartbeatConfig
		interval, timeout time.Duration
	}{
		{nil, DefaultHeartbeatInterval, 3 * DefaultHeartbeatInterval},
		{&iop.HeartbeatConfig{}, DefaultHeartbeatInterval, 3 * DefaultHeartbeatInterval},
		{&iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 300}, 50 * time.Millisecond, 300 * time.Millisecond},
		// A timeout not above the interval would fire between heartbeats.
		{&iop.HeartbeatConfig{IntervalMs: 100, TimeoutMs: 100}, 100 * time.Millisecond, 300 * time.Millisecond},
		{&iop.HeartbeatConfig{IntervalMs: 100, TimeoutMs: 10}, 100 * time.Millisecond, 300 * time.Millisecond},
		{&iop.HeartbeatConfig{TimeoutMs: 1000}, DefaultHeartbeatInterval, 3 * DefaultHeartbeatInterval},
	}
	for _, tc := range cases {
		iv, to := heartbeatDurations(tc.cfg)
		if iv != tc.interval || to != tc.timeout {
			t.Errorf("heartbeatDurations(%v) = %v, %v; want %v, %v", tc.cfg, iv, to, tc.interval, tc.timeout)
		}
	}
	if DefaultHeartbeatTimeout != 3*DefaultHeartbeatInterval {
		t.Errorf("DefaultHeartbeatTimeout %v is not what zero config yields", DefaultHeartbeatTimeout)
	}
}
