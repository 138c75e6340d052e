package nodewire

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// v6Listener reports each accepted connection as coming from the next
// address of one IPv6 /64, as a host that was given the /64 could.
type v6Listener struct {
	net.Listener
	next atomic.Uint32
}

type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c *addrConn) RemoteAddr() net.Addr { return c.remote }

func (l *v6Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.next.Add(1)
	ip := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, byte(n >> 8), byte(n)})
	return &addrConn{Conn: c, remote: net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 40000))}, nil
}

// startServerOn runs a Server with h on ln. Cleanup closes it.
func startServerOn(t *testing.T, ln net.Listener, h ServerHandler, cfg ServerConfig) *Server {
	t.Helper()
	cfg.Handler = h
	srv := NewServer(cfg)
	done := make(chan error, 1)
	// Owner: the test; stops at srv.Close in Cleanup.
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return srv
}

func (s *Server) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// Connections from different addresses of one IPv6 /64 share one
// per-source bound: one host cannot take every pending place by using a
// new address for each connection.
func TestPendingBoundPerIPv6Prefix(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServerOn(t, &v6Listener{Listener: inner}, newFakeHandler(), ServerConfig{MaxPendingHandshakes: 64})
	addr := inner.Addr().String()
	for range maxPendingPerSource {
		dialIdle(t, addr, "")
	}
	waitFor(t, "the server to take the connections", func() bool { return srv.pendingCount() == maxPendingPerSource })
	if c := dialIdle(t, addr, ""); stillOpen(c, waitLong/5) {
		t.Fatalf("connection %d from one /64 was kept (per-source bound %d)", maxPendingPerSource+1, maxPendingPerSource)
	}
}

func TestSourceOf(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.7:1234", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:1234", "192.0.2.7"},
		{"[2001:db8:1:2:aaaa::1]:1234", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:1", "2001:db8:1:2::/64"},
		{"[2001:db8:1:3::1]:1", "2001:db8:1:3::/64"},
		{"[fe80::1%eth0]:1", "fe80::/64"},
	} {
		ap := netip.MustParseAddrPort(tc.remote)
		c := &addrConn{remote: net.TCPAddrFromAddrPort(ap)}
		if got := sourceOf(c); got != tc.want {
			t.Errorf("sourceOf(%s) = %q, want %q", tc.remote, got, tc.want)
		}
	}
}

// rejectingHandler refuses every registration as an unknown node and keeps
// nothing of it.
type rejectingHandler struct{ closed chan struct{} }

func (h *rejectingHandler) Register(*Conn, *iop.RegisterRequest) *iop.RegisterResponse {
	return rejectResponse(iop.RejectCode_REJECT_CODE_UNKNOWN_NODE, "node id is not configured")
}
func (h *rejectingHandler) Ready(*Conn, *iop.NodeReadyRequest) *iop.NodeReadyResponse {
	return &iop.NodeReadyResponse{}
}
func (h *rejectingHandler) Activate(*Conn)      {}
func (h *rejectingHandler) Closed(*Conn, error) { h.closed <- struct{}{} }

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Refused registrations are remembered (for the failed-credential delay)
// at a small fixed cost each, whatever node id the peer sent: the id may
// be almost a whole registration frame, and the table holds thousands.
func TestRefusedRegistrationsRetainLittle(t *testing.T) {
	const conns = 512
	h := &rejectingHandler{closed: make(chan struct{}, conns)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServerOn(t, ln, h, ServerConfig{MaxPendingHandshakes: -1, MaxConns: -1})
	filler := strings.Repeat("x", maxRegisterFrame-200)
	before := heapInUse()
	for i := range conns {
		req := testRegisterRequest(fmt.Sprintf("%s-%d", filler, i))
		frame, err := AppendFrame(preface[:], &iop.Envelope{Body: &iop.Envelope_RegisterRequest{RegisterRequest: req}}, maxRegisterFrame)
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Write(frame)
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range conns {
		select {
		case <-h.closed:
		case <-time.After(4 * waitLong):
			t.Fatalf("%d of %d refused connections closed", i, conns)
		}
	}
	srv.failures.mu.Lock()
	remembered := len(srv.failures.byKey)
	srv.failures.mu.Unlock()
	if remembered != conns {
		t.Fatalf("%d failures remembered, want %d", remembered, conns)
	}
	grew := int64(heapInUse()) - int64(before)
	t.Logf("heap grew by %d bytes for %d remembered refusals of %d-byte ids", grew, conns, len(filler))
	if limit := int64(conns * 2048); grew > limit {
		t.Fatalf("heap grew by %d bytes for %d refusals (bound %d): the node ids are kept", grew, conns, limit)
	}
}

// The node id of a refused registration is the peer's own text: the edge
// logs it cut to a bound, escaped by the encoder, never the whole frame's
// worth of it.
func TestRefusedNodeIDIsBoundedInLogs(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	h := &rejectingHandler{closed: make(chan struct{}, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startServerOn(t, ln, h, ServerConfig{Logger: zap.New(core)})
	id := "forged\nlevel=error msg=\"injected\" " + strings.Repeat("é", (maxRegisterFrame-200)/2)
	frame, err := AppendFrame(preface[:], &iop.Envelope{Body: &iop.Envelope_RegisterRequest{RegisterRequest: testRegisterRequest(id)}}, maxRegisterFrame)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite() // the edge's linger ends at once
	select {
	case <-h.closed:
	case <-time.After(waitLong):
		t.Fatal("the refused connection was not closed")
	}
	found := 0
	for _, e := range logs.AllUntimed() {
		for _, f := range e.Context {
			if f.Key != "node_id" {
				continue
			}
			found++
			if len(f.String) > maxLoggedNodeID+len("…") || !utf8.ValidString(f.String) {
				t.Errorf("%q logged a %d-byte node id (bound %d)", e.Message, len(f.String), maxLoggedNodeID)
			}
		}
	}
	if found == 0 {
		t.Fatal("the refusal was logged without its node id")
	}
}
