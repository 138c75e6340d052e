package gateway

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// The edge's listener hands http.Server its own wrapper of each accepted
// connection (internal/edgeapp's limitTCPConn, embedding *net.TCPConn):
// the bound must reach the socket through such a wrapper too, or it would
// hold in tests (bare connections) and not in production.
func TestBoundUnsentReachesWrappedTCPConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wrapped := &struct {
		*net.TCPConn
		slot int
	}{TCPConn: c.(*net.TCPConn)}
	boundUnsent(wrapped)

	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	if got != clientNotSentLowat {
		t.Fatalf("TCP_NOTSENT_LOWAT = %d, want %d", got, clientNotSentLowat)
	}
}
