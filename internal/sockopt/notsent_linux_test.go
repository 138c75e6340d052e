package sockopt

import (
	"net"
	"testing"
)

// The bound reaches the socket through a wrapper embedding *net.TCPConn
// (as the edge's connection-limiting listeners hand out), and leaves a
// connection that is not a socket alone.
func TestBoundUnsentThroughWrapper(t *testing.T) {
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
	BoundUnsent(wrapped, 96<<10)
	if got := Unsent(c); got != 96<<10 {
		t.Fatalf("TCP_NOTSENT_LOWAT = %d, want %d", got, 96<<10)
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	BoundUnsent(p1, 1) // no socket: nothing to do, nothing to fail
	if got := Unsent(p1); got != -1 {
		t.Fatalf("Unsent(pipe) = %d, want -1", got)
	}
}
