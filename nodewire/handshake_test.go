package nodewire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestHandshakeHappyPath(t *testing.T) {
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{})

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	req := testRegisterRequest("node-1") // ProtocolVersion left 0: Dial fills it
	cc, resp, err := Dial(ctx, DialConfig{Address: ts.addr}, req)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer cc.Close()
	sc := recvConn(t, h.registered, "Register")

	if !resp.GetAccepted() || resp.GetNodeId() != "node-1" {
		t.Fatalf("RegisterResponse = %v, want accepted for node-1", resp)
	}
	if want := acceptResponse("node-1", testHeartbeat).GetConfig(); !proto.Equal(resp.GetConfig(), want) {
		t.Fatalf("config = %v, want %v", resp.GetConfig(), want)
	}
	regs := h.registerRequests()
	if len(regs) != 1 {
		t.Fatalf("%d Register calls, want 1", len(regs))
	}
	got := regs[0]
	if got.GetProtocolVersion() != ProtocolVersion || got.GetNodeId() != "node-1" || got.GetToken() != "secret-token" ||
		got.GetAgentVersion() != "test/1" || len(got.GetAdapterTypes()) != 2 {
		t.Fatalf("server saw RegisterRequest %v", got)
	}
	// Pending ownership only: no Ready before the Node asks.
	if _, readies, _ := h.counts(); readies != 0 {
		t.Fatalf("Ready called %d times before the Node's ready request", readies)
	}
	if cc.RemoteAddr().String() != ts.addr {
		t.Fatalf("RemoteAddr = %v, want %v", cc.RemoteAddr(), ts.addr)
	}

	if err := cc.Ready(ctx, "node-1"); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if recvConn(t, h.readied, "Ready") != sc {
		t.Fatal("Ready called with another Conn than Register")
	}
	if rr := h.readyRequests(); len(rr) != 1 || rr[0].GetNodeId() != "node-1" {
		t.Fatalf("Ready requests %v, want one for node-1", rr)
	}

	// Heartbeats flow both ways on the control stream.
	waitFor(t, "heartbeats on both sides", func() bool {
		c, s := cc.Stats(), sc.Stats()
		return c.HeartbeatsReceived >= 3 && s.HeartbeatsReceived >= 3 && c.HeartbeatsSent >= 3 && s.HeartbeatsSent >= 3
	})
	st := sc.Stats()
	if st.ConnectedAt.IsZero() || st.LastReceived.Before(st.ConnectedAt) || st.StreamsOpen < 1 {
		t.Fatalf("server stats %+v", st)
	}
	select {
	case <-sc.Done():
		t.Fatalf("server conn closed: %v", sc.Err())
	case <-cc.Done():
		t.Fatalf("client conn closed: %v", cc.Err())
	default:
	}
	if sc.Err() != nil || cc.Err() != nil {
		t.Fatalf("Err on open connections: server %v, client %v", sc.Err(), cc.Err())
	}

	// The Node going away ends the server's Conn and reports it once.
	if err := cc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !errors.Is(cc.Err(), ErrClosed) {
		t.Fatalf("client Err after Close = %v, want ErrClosed", cc.Err())
	}
	call := recvClosed(t, h)
	if call.c != sc || call.err == nil {
		t.Fatalf("Closed(%p, %v), want the server conn with a cause", call.c, call.err)
	}
	waitDone(t, sc, waitLong, "server conn after the client closed")
	ts.close(t)
	if regs, readies, closed := h.counts(); regs != 1 || readies != 1 || closed != 1 {
		t.Fatalf("calls: Register %d, Ready %d, Closed %d; want 1, 1, 1", regs, readies, closed)
	}
}

func TestHandshakeRejected(t *testing.T) {
	cases := []struct {
		name    string
		decide  func(req *iop.RegisterRequest) *iop.RegisterResponse
		modify  func(req *iop.RegisterRequest)
		code    iop.RejectCode
		fatal   bool
		reasonS string
	}{
		{
			name: "wrong token",
			decide: func(req *iop.RegisterRequest) *iop.RegisterResponse {
				if req.GetToken() != "right-token" {
					return rejectResponse(iop.RejectCode_REJECT_CODE_CREDENTIALS, "bad token")
				}
				return acceptResponse(req.GetNodeId(), nil)
			},
			code: iop.RejectCode_REJECT_CODE_CREDENTIALS, fatal: true, reasonS: "bad token",
		},
		{
			name: "wrong protocol version",
			decide: func(req *iop.RegisterRequest) *iop.RegisterResponse {
				if v := req.GetProtocolVersion(); v != ProtocolVersion {
					return rejectResponse(iop.RejectCode_REJECT_CODE_PROTOCOL_VERSION, fmt.Sprintf("version %d", v))
				}
				return acceptResponse(req.GetNodeId(), nil)
			},
			modify: func(req *iop.RegisterRequest) { req.ProtocolVersion = 99 },
			code:   iop.RejectCode_REJECT_CODE_PROTOCOL_VERSION, fatal: true, reasonS: "version 99",
		},
		{
			name: "edge unavailable",
			decide: func(*iop.RegisterRequest) *iop.RegisterResponse {
				return rejectResponse(iop.RejectCode_REJECT_CODE_UNAVAILABLE, "shutting down")
			},
			code: iop.RejectCode_REJECT_CODE_UNAVAILABLE, fatal: false, reasonS: "shutting down",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHandler()
			h.register = func(_ *Conn, req *iop.RegisterRequest) *iop.RegisterResponse { return tc.decide(req) }
			ts := startServer(t, h, ServerConfig{})

			req := testRegisterRequest("node-1")
			if tc.modify != nil {
				tc.modify(req)
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			cc, resp, err := Dial(ctx, DialConfig{Address: ts.addr}, req)
			if cc != nil || resp != nil {
				t.Fatalf("Dial returned a connection for a rejected registration")
			}
			var rej *RejectedError
			if !errors.As(err, &rej) {
				t.Fatalf("Dial error %v, want *RejectedError", err)
			}
			if rej.Code != tc.code || rej.Reason != tc.reasonS || rej.Fatal() != tc.fatal {
				t.Fatalf("RejectedError{%v, %q} Fatal=%v; want {%v, %q} Fatal=%v", rej.Code, rej.Reason, rej.Fatal(), tc.code, tc.reasonS, tc.fatal)
			}
			if tc.modify != nil && h.registerRequests()[0].GetProtocolVersion() != 99 {
				t.Fatal("Dial overwrote an explicit protocol version")
			}

			sc := recvConn(t, h.registered, "Register")
			call := recvClosed(t, h)
			if call.c != sc {
				t.Fatal("Closed called with another Conn than Register")
			}
			var srej *RejectedError
			if !errors.As(call.err, &srej) || srej.Code != tc.code {
				t.Fatalf("Closed cause %v, want the RejectedError", call.err)
			}
			waitDone(t, sc, waitLong, "rejected server conn")
			ts.close(t)
			if regs, readies, closed := h.counts(); regs != 1 || readies != 0 || closed != 1 {
				t.Fatalf("calls: Register %d, Ready %d, Closed %d; want 1, 0, 1", regs, readies, closed)
			}
		})
	}
}

func TestRejectedErrorFatal(t *testing.T) {
	for code, fatal := range map[iop.RejectCode]bool{
		iop.RejectCode_REJECT_CODE_UNSPECIFIED:      false,
		iop.RejectCode_REJECT_CODE_CREDENTIALS:      true,
		iop.RejectCode_REJECT_CODE_UNKNOWN_NODE:     true,
		iop.RejectCode_REJECT_CODE_PROTOCOL_VERSION: true,
		iop.RejectCode_REJECT_CODE_UNAVAILABLE:      false,
	} {
		e := &RejectedError{Code: code, Reason: "r"}
		if e.Fatal() != fatal {
			t.Errorf("%v: Fatal() = %v, want %v", code, e.Fatal(), fatal)
		}
		if e.Error() == "" {
			t.Errorf("%v: empty Error()", code)
		}
	}
}

func TestReadyRefused(t *testing.T) {
	h := newFakeHandler()
	h.ready = func(*Conn, *iop.NodeReadyRequest) *iop.NodeReadyResponse {
		return &iop.NodeReadyResponse{Ready: false, Reason: "superseded"}
	}
	ts := startServer(t, h, ServerConfig{})
	cc, _ := dial(t, DialConfig{Address: ts.addr}, "node-1")
	sc := recvConn(t, h.registered, "Register")

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	err := cc.Ready(ctx, "node-1")
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("Ready: got %v, want ErrNotReady", err)
	}
	// The Edge hangs up even if the Node never closes its side (it lingers
	// two seconds for the Node to go first).
	waitDone(t, cc.Conn, waitLong, "client conn after ready=false")
	waitDone(t, sc, waitLong, "server conn after ready=false")
	call := recvClosed(t, h)
	if call.c != sc || !errors.Is(call.err, ErrNotReady) {
		t.Fatalf("Closed cause %v, want ErrNotReady", call.err)
	}
	if sc.Stats().HeartbeatsSent != 0 || cc.Stats().HeartbeatsSent != 0 {
		t.Fatal("heartbeats started on a connection that never became ready")
	}
	ts.close(t)
	if regs, readies, closed := h.counts(); regs != 1 || readies != 1 || closed != 1 {
		t.Fatalf("calls: Register %d, Ready %d, Closed %d; want 1, 1, 1", regs, readies, closed)
	}
}

// A peer that is not an iop Node is dropped without reaching the handler.
func TestHandshakeNonIOPPeer(t *testing.T) {
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{HandshakeTimeout: waitLong})

	raw, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Write([]byte("GET / HTTP/1.1\r\nHost: edge\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	expectClosedByPeer(t, raw, waitLong)
	if el := time.Since(start); el > waitLong/2 {
		t.Fatalf("garbage peer dropped only after %v: it should go at once, not at the handshake timeout", el)
	}
	ts.close(t)
	if regs, readies, closed := h.counts(); regs+readies+closed != 0 {
		t.Fatalf("handler called for a non-iop peer: Register %d, Ready %d, Closed %d", regs, readies, closed)
	}
}

// A peer that connects and says nothing is closed after HandshakeTimeout.
func TestHandshakeSilentPeer(t *testing.T) {
	const hsTimeout = 200 * time.Millisecond
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{HandshakeTimeout: hsTimeout})

	raw, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	start := time.Now()
	expectClosedByPeer(t, raw, waitLong)
	if el := time.Since(start); el < hsTimeout*3/4 {
		t.Fatalf("silent peer closed after %v, before the %v handshake timeout", el, hsTimeout)
	}
	ts.close(t)
	if regs, readies, closed := h.counts(); regs+readies+closed != 0 {
		t.Fatalf("handler called for a silent peer: Register %d, Ready %d, Closed %d", regs, readies, closed)
	}
}

// A peer that speaks the preface and the multiplexer but then sends
// something other than a RegisterRequest (or nothing) is dropped without a
// handler call.
func TestHandshakeBadFirstMessage(t *testing.T) {
	cases := []struct {
		name string
		send func(st *muxStream) error // nil: open no control stream
	}{
		{"no control stream", nil},
		{"heartbeat first", func(st *muxStream) error {
			return WriteFrame(st, &iop.Envelope{Body: &iop.Envelope_Heartbeat{Heartbeat: &iop.Heartbeat{Sequence: 1}}}, 0)
		}},
		{"oversize frame", func(st *muxStream) error {
			_, err := st.Write(header(DefaultMaxFrameSize + 1))
			return err
		}},
		{"silent control stream", func(st *muxStream) error {
			_, err := st.Write(nil) // opens the stream, sends no frame
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHandler()
			ts := startServer(t, h, ServerConfig{HandshakeTimeout: 300 * time.Millisecond})
			raw, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := raw.Write(preface[:]); err != nil {
				t.Fatal(err)
			}
			sess := muxClient(raw)
			defer sess.Close()
			if tc.send != nil {
				st, err := sess.OpenStream()
				if err != nil {
					t.Fatal(err)
				}
				// The server may drop the session as soon as the bytes
				// arrive, before the write is reported done: a write
				// error here is not a failure.
				_ = tc.send(st)
			}
			select {
			case <-sess.CloseChan():
			case <-time.After(waitLong):
				t.Fatal("server kept a connection whose first message is not a RegisterRequest")
			}
			ts.close(t)
			if regs, readies, closed := h.counts(); regs+readies+closed != 0 {
				t.Fatalf("handler called: Register %d, Ready %d, Closed %d", regs, readies, closed)
			}
		})
	}
}

// Dial is bounded by HandshakeTimeout even when the far end accepts the TCP
// connection and then never answers.
func TestDialHandshakeTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	// Owner: the test; stops after one accept or when ln closes.
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	defer func() {
		for c := range accepted {
			_ = c.Close()
		}
	}()

	const hsTimeout = 200 * time.Millisecond
	start := time.Now()
	cc, _, err := Dial(context.Background(), DialConfig{Address: ln.Addr().String(), HandshakeTimeout: hsTimeout}, testRegisterRequest("n"))
	if err == nil {
		_ = cc.Close()
		t.Fatal("Dial succeeded against a mute peer")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial error %v, want it to wrap context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > waitLong {
		t.Fatalf("Dial took %v with a %v handshake timeout", el, hsTimeout)
	}

	// A cancelled caller context ends Dial too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if cc, _, err := Dial(ctx, DialConfig{Address: ln.Addr().String()}, testRegisterRequest("n")); err == nil {
		_ = cc.Close()
		t.Fatal("Dial succeeded with a cancelled context")
	}
}

// A Ready that gets no answer is bounded by the handshake timeout and closes
// the connection.
func TestReadyTimeoutClosesConn(t *testing.T) {
	h := newFakeHandler()
	release := make(chan struct{})
	h.ready = func(*Conn, *iop.NodeReadyRequest) *iop.NodeReadyResponse {
		<-release
		return &iop.NodeReadyResponse{Ready: true}
	}
	ts := startServer(t, h, ServerConfig{})
	defer close(release) // before ts.close, so the handler can return
	cc, _ := dial(t, DialConfig{Address: ts.addr}, "node-1")

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := cc.Ready(ctx, "node-1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ready: got %v, want context.DeadlineExceeded", err)
	}
	waitDone(t, cc.Conn, waitLong, "client conn after a Ready timeout")
	if !errors.Is(cc.Err(), context.DeadlineExceeded) {
		t.Fatalf("client Err = %v, want context.DeadlineExceeded", cc.Err())
	}
}

// After the handshake only heartbeats may travel on the control stream.
func TestControlStreamProtocolViolation(t *testing.T) {
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")

	// The Edge may drop the session as soon as this frame arrives.
	_ = cc.ctrl.Send(smallDeltaEnvelope())
	waitDone(t, sc, waitLong, "server conn after a protocol violation")
	if !errors.Is(sc.Err(), ErrProtocol) {
		t.Fatalf("server Err = %v, want ErrProtocol", sc.Err())
	}
	if call := recvClosed(t, h); !errors.Is(call.err, ErrProtocol) {
		t.Fatalf("Closed cause %v, want ErrProtocol", call.err)
	}
	waitDone(t, cc.Conn, waitLong, "client conn after the server dropped it")
}
