package config

import (
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// listen.http and listen.node on one port, one of them on every address
// (an empty host, 0.0.0.0, ::), are refused at load: Go binds such a
// host with one dual-stack socket, and the second listener would fail at
// start. The config's answer is checked against Linux's: on a free port,
// both addresses are bound as the edge binds them, and the second bind
// fails exactly when the config is refused.
func TestListenersSharingAPortWithAWildcardRefused(t *testing.T) {
	v6, v6err := net.Listen("tcp", "[::1]:0")
	if v6err == nil {
		_ = v6.Close()
	}
	cases := []overlapCase{
		{"127.0.0.1:PORT", "0.0.0.0:PORT", true, true},
		{"0.0.0.0:PORT", "127.0.0.1:PORT", true, true},
		{":PORT", "127.0.0.1:PORT", true, true},
		{"[::]:PORT", "127.0.0.1:PORT", true, true},
		{"0.0.0.0:PORT", "[::1]:PORT", true, v6err == nil},
		{"[::]:PORT", "0.0.0.0:PORT", true, true},
		{"[::ffff:0.0.0.0]:PORT", "127.0.0.1:0PORT", true, true}, // 0PORT: the same port
		{"0.0.0.0:PORT", "localhost:PORT", true, false},
		{"0.0.0.0:PORT", "10.0.0.1:PORT", true, false},
		{"127.0.0.1:PORT", "[::1]:PORT", false, v6err == nil},
		{"127.0.0.1:PORT", "10.0.0.1:PORT", false, false},
		{"0.0.0.0:PORT", "0.0.0.0:1", false, false},
		{"0.0.0.0:0", ":0", false, true}, // a free port each
	}
	for _, tc := range cases {
		// A case whose second bind should succeed is tried again on
		// another free port when some other process holds its port on
		// the second host (free on the first is all the kernel promised).
		for try := 1; !tc.check(t, try == 5); try++ {
		}
	}

	// The same address twice is told as before, once.
	c := minimalEdge()
	c.Listen.HTTP, c.Listen.Node = "0.0.0.0:8080", "0.0.0.0:8080"
	err := c.Normalize()
	if err == nil || !strings.Contains(err.Error(), `listen.http and listen.node are both "0.0.0.0:8080"`) || strings.Contains(err.Error(), "share a port") {
		t.Errorf("one address twice: %v", err)
	}
}

// overlapCase is a case of TestListenersSharingAPortWithAWildcardRefused.
type overlapCase struct {
	http, node string // PORT is a free port
	refused    bool
	bind       bool // both hosts can be bound here
}

// check checks the case. It reports false, having decided nothing, when
// the second bind of a case that should bind found the port taken by
// another process and last is false (the caller tries again).
func (tc overlapCase) check(t *testing.T, last bool) bool {
	t.Helper()
	linux := tc.bind && runtime.GOOS == "linux"
	// Where both are bound, the first is bound on a free port before
	// the config is checked, so that no other process can take the
	// port in between; elsewhere the port is only a number.
	port := "18080"
	var a net.Listener
	if linux {
		var err error
		if a, err = net.Listen("tcp", strings.ReplaceAll(tc.http, "PORT", "0")); err != nil {
			t.Fatalf("bind %s: %v", tc.http, err)
		}
		port = strconv.Itoa(a.Addr().(*net.TCPAddr).Port)
	}
	http, node := strings.ReplaceAll(tc.http, "PORT", port), strings.ReplaceAll(tc.node, "PORT", port)
	c := minimalEdge()
	c.Listen.HTTP, c.Listen.Node = http, node
	err := c.Normalize()
	if refused := err != nil; refused != tc.refused {
		t.Errorf("%s and %s: err = %v, want refused %v", http, node, err, tc.refused)
	} else if tc.refused {
		want := "listen.http " + strconv.Quote(http) + " and listen.node " + strconv.Quote(node) + " share a port, and "
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "listens on every address of this machine; they need different ports") {
			t.Errorf("%s and %s: err = %v\nwant %q…", http, node, err, want)
		}
	}
	if !linux {
		// Systems whose SO_REUSEADDR lets a specific bind beside a
		// wildcard one are refused all the same (listenOverlap).
		return true
	}
	b, err := net.Listen("tcp", node)
	_ = a.Close()
	if b != nil {
		_ = b.Close()
	}
	if !tc.refused && !last && errors.Is(err, syscall.EADDRINUSE) {
		return false
	}
	if (err != nil) != tc.refused {
		t.Errorf("%s then %s: second bind err = %v, but the config check says refused %v", http, node, err, tc.refused)
	}
	return true
}
