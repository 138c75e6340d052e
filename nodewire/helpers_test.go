package nodewire

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/iop-gateway/iop/internal/faultproxy"
	"github.com/iop-gateway/iop/internal/testwait"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Every test must leave no goroutine behind: servers, sessions, heartbeat
// loops, stream handlers and Abort drains all have owners that end them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitLong bounds every wait on a condition or a channel. Timings in the
// tests are small; deadlines are generous because the machine is shared.
const waitLong = 5 * time.Second

// testHeartbeat is the heartbeat the handlers hand down by default: fast
// enough that tests see heartbeats flow, with a timeout generous enough that
// a loaded machine never trips it. heartbeat_test.go uses tight timeouts.
var testHeartbeat = &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 5000}

type closedCall struct {
	c   *Conn
	err error
}

// fakeHandler is a ServerHandler that records every call. register and
// ready, when set, decide the answers; by default registrations are
// accepted with testHeartbeat and readiness is granted.
type fakeHandler struct {
	register func(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse
	ready    func(c *Conn, req *iop.NodeReadyRequest) *iop.NodeReadyResponse
	activate func(c *Conn) // called by Activate, when set

	registered chan *Conn      // every Register call's conn
	readied    chan *Conn      // every Ready call's conn
	closedCh   chan closedCall // every Closed call

	mu      sync.Mutex
	regs    []*iop.RegisterRequest  // guarded by mu
	readies []*iop.NodeReadyRequest // guarded by mu
	closed  []closedCall            // guarded by mu
	// activated is guarded by mu: every Activate call's conn.
	activated []*Conn
}

func newFakeHandler() *fakeHandler {
	return &fakeHandler{
		registered: make(chan *Conn, 64),
		readied:    make(chan *Conn, 64),
		closedCh:   make(chan closedCall, 64),
	}
}

func (h *fakeHandler) Register(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
	h.mu.Lock()
	h.regs = append(h.regs, req)
	h.mu.Unlock()
	h.registered <- c
	if h.register != nil {
		return h.register(c, req)
	}
	return acceptResponse(req.GetNodeId(), testHeartbeat)
}

func (h *fakeHandler) Ready(c *Conn, req *iop.NodeReadyRequest) *iop.NodeReadyResponse {
	h.mu.Lock()
	h.readies = append(h.readies, req)
	h.mu.Unlock()
	h.readied <- c
	if h.ready != nil {
		return h.ready(c, req)
	}
	return &iop.NodeReadyResponse{Ready: true}
}

func (h *fakeHandler) Activate(c *Conn) {
	h.mu.Lock()
	h.activated = append(h.activated, c)
	h.mu.Unlock()
	if h.activate != nil {
		h.activate(c)
	}
}

func (h *fakeHandler) Closed(c *Conn, err error) {
	h.mu.Lock()
	h.closed = append(h.closed, closedCall{c, err})
	h.mu.Unlock()
	h.closedCh <- closedCall{c, err}
}

// counts returns how many Register, Ready and Closed calls were made.
func (h *fakeHandler) counts() (regs, readies, closed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.regs), len(h.readies), len(h.closed)
}

func (h *fakeHandler) registerRequests() []*iop.RegisterRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*iop.RegisterRequest(nil), h.regs...)
}

func (h *fakeHandler) readyRequests() []*iop.NodeReadyRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*iop.NodeReadyRequest(nil), h.readies...)
}

func acceptResponse(nodeID string, hb *iop.HeartbeatConfig) *iop.RegisterResponse {
	return &iop.RegisterResponse{
		Accepted:        true,
		NodeId:          nodeID,
		ProtocolVersion: ProtocolVersion,
		Config: &iop.NodeConfigPayload{
			Adapters: []*iop.AdapterConfig{{
				Name: "local-vllm", Type: "vllm", Category: "local_inference",
				Capacity: 4, BaseUrl: "http://127.0.0.1:8000/v1",
			}},
			Runtime:       &iop.NodeRuntimeConfig{Concurrency: 4},
			Heartbeat:     hb,
			ConfigVersion: "cfg-1",
		},
	}
}

func rejectResponse(code iop.RejectCode, reason string) *iop.RegisterResponse {
	return &iop.RegisterResponse{Accepted: false, RejectCode: code, Reason: reason, ProtocolVersion: ProtocolVersion}
}

// testServer is a running Server on a loopback listener.
type testServer struct {
	srv     *Server
	addr    string
	h       *fakeHandler
	serveCh chan error // Serve's result
	once    sync.Once
}

// startServer runs a Server with h on 127.0.0.1:0. Cleanup closes it and
// waits for Serve to return.
func startServer(t *testing.T, h *fakeHandler, cfg ServerConfig) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Handler = h
	ts := &testServer{srv: NewServer(cfg), addr: ln.Addr().String(), h: h, serveCh: make(chan error, 1)}
	// Owner: the test; stops at srv.Close (ts.close, also run by Cleanup).
	go func() { ts.serveCh <- ts.srv.Serve(ln) }()
	t.Cleanup(func() { ts.close(t) })
	return ts
}

// close closes the server and checks that Serve returned nil. Idempotent.
func (ts *testServer) close(t *testing.T) {
	t.Helper()
	ts.once.Do(func() {
		closed := make(chan struct{})
		// Owner: this call; Close returns once every connection is done.
		go func() { _ = ts.srv.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(waitLong):
			t.Errorf("Server.Close did not return within %v", waitLong)
			return
		}
		select {
		case err := <-ts.serveCh:
			if err != nil {
				t.Errorf("Serve returned %v after Close, want nil", err)
			}
		case <-time.After(waitLong):
			t.Errorf("Serve did not return within %v of Close", waitLong)
		}
	})
}

func testRegisterRequest(nodeID string) *iop.RegisterRequest {
	return &iop.RegisterRequest{
		NodeId: nodeID, Token: "secret-token", AgentVersion: "test/1",
		AdapterTypes: []string{"openai_compat", "vllm"},
	}
}

// dial registers nodeID at addr; the test fails on error. Cleanup closes the
// connection.
func dial(t *testing.T, cfg DialConfig, nodeID string) (*ClientConn, *iop.RegisterResponse) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cc, resp, err := Dial(ctx, cfg, testRegisterRequest(nodeID))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc, resp
}

// readyPair dials ts, completes the ready exchange and returns the client
// connection and the server's Conn for it.
func readyPair(t *testing.T, ts *testServer, nodeID string) (*ClientConn, *Conn) {
	t.Helper()
	return readyPairVia(t, ts.addr, ts.h, nodeID)
}

// readyPairVia is readyPair through addr (a proxy in front of the server
// whose handler is h).
func readyPairVia(t *testing.T, addr string, h *fakeHandler, nodeID string) (*ClientConn, *Conn) {
	t.Helper()
	cc, _ := dial(t, DialConfig{Address: addr}, nodeID)
	sc := recvConn(t, h.registered, "Register")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := cc.Ready(ctx, nodeID); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if got := recvConn(t, h.readied, "Ready"); got != sc {
		t.Fatalf("Ready called for another Conn than Register")
	}
	return cc, sc
}

func recvConn(t *testing.T, ch <-chan *Conn, what string) *Conn {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(waitLong):
		t.Fatalf("handler.%s not called within %v", what, waitLong)
		return nil
	}
}

func recvClosed(t *testing.T, h *fakeHandler) closedCall {
	t.Helper()
	select {
	case cc := <-h.closedCh:
		return cc
	case <-time.After(waitLong):
		t.Fatalf("handler.Closed not called within %v", waitLong)
		return closedCall{}
	}
}

// waitDone waits for c to close.
func waitDone(t *testing.T, c *Conn, within time.Duration, what string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(within):
		t.Fatalf("%s: connection still open after %v", what, within)
	}
}

// waitFor polls cond until it holds or waitLong passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, waitLong, 5*time.Millisecond, what, cond)
}

// recvWithin reads one envelope from st with a read deadline.
func recvWithin(st *Stream, d time.Duration) (*iop.Envelope, error) {
	_ = st.SetReadDeadline(time.Now().Add(d))
	defer func() { _ = st.SetReadDeadline(time.Time{}) }()
	return st.Recv()
}

// expectClosedByPeer reads from raw until it ends and fails unless the peer
// closed it (EOF or reset) within d.
func expectClosedByPeer(t *testing.T, raw net.Conn, d time.Duration) {
	t.Helper()
	_ = raw.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, raw)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("peer did not close the connection within %v", d)
	}
}

// startProxy puts a fault proxy in front of target for the test's duration.
func startProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
