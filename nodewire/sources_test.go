package nodewire

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
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
