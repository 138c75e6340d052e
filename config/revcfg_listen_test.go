package config

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// revcfgListenProblem is what Normalize says about listen.http and
// listen.node sharing an address ("" when nothing).
func revcfgListenProblem(httpAddr, nodeAddr string) string {
	c := minimalEdge()
	c.Listen.HTTP, c.Listen.Node = httpAddr, nodeAddr
	err := c.Normalize()
	if err == nil {
		return ""
	}
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.Contains(l, "they need different addresses") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// The listeners are compared as the socket they bind, not as written: a
// port with leading zeros, a name in another case or an IPv4-mapped
// address is the same socket, and the second bind fails at start. Port 0
// (any free port) on both is two sockets however it is written.
func TestListenersOnOneSocketSpelledTwoWaysRefused(t *testing.T) {
	// The dialer's reading of the port is the listener's: with a port
	// bound, the same port with a leading zero cannot be bound again.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if l2, err := net.Listen("tcp", "127.0.0.1:0"+port); err == nil {
		l2.Close()
		t.Fatalf("127.0.0.1:0%s bound beside 127.0.0.1:%s; the premise is wrong", port, port)
	}
	for _, pair := range [][2]string{
		{"127.0.0.1:" + port, "127.0.0.1:0" + port},
		{":8080", ":08080"},
		{"LOCALHOST:9000", "localhost:9000"},
		{"localhost.:9000", "localhost:9000"},
		{"[::ffff:127.0.0.1]:9000", "127.0.0.1:9000"},
		{"127.0.0.1:9000", "127.0.0.1:9000"},
	} {
		if got := revcfgListenProblem(pair[0], pair[1]); !strings.Contains(got, "listen.http") || !strings.Contains(got, "listen.node") {
			t.Errorf("listen.http %q, listen.node %q: %q; want them refused as one address", pair[0], pair[1], got)
		}
	}
	for _, pair := range [][2]string{
		{":00", ":00"},
		{"127.0.0.1:0", "127.0.0.1:000"},
		{"127.0.0.1:9000", "127.0.0.1:9001"},
		{"127.0.0.1:9000", "127.0.0.2:9000"},
		{"[fe80::1%eth0]:9000", "[fe80::1%eth1]:9000"},
	} {
		if got := revcfgListenProblem(pair[0], pair[1]); got != "" {
			t.Errorf("listen.http %q, listen.node %q: %q; want them accepted", pair[0], pair[1], got)
		}
	}
	// Two listeners on port 0, written with zeros, bind two free ports.
	a, err := net.Listen("tcp", "127.0.0.1:00")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := net.Listen("tcp", "127.0.0.1:00")
	if err != nil {
		t.Fatalf("a second listener on port 00: %v", err)
	}
	b.Close()
}
