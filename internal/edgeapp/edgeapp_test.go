package edgeapp

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/iop-gateway/iop/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(t *testing.T) *config.Edge {
	t.Helper()
	cfg := &config.Edge{
		Listen: config.EdgeListen{HTTP: "127.0.0.1:0", Node: "127.0.0.1:0", MaxHTTPConns: 2},
		Nodes: []config.NodeSpec{{ID: "a", Token: "tok", Providers: []config.ProviderSpec{
			{Name: "m", Type: "mock", Capacity: 1}}}},
		Models: []config.ModelSpec{{Name: "m", Providers: []config.ModelProvider{{Node: "a", Provider: "m", Target: "x"}}}},
	}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// listen.max_http_conns: connections beyond the cap wait (in the kernel's
// backlog) until one of the first ones closes; none is refused.
func TestMaxHTTPConns(t *testing.T) {
	e, err := New(testConfig(t), Options{HealthInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	// Owner: the test; ends at e.Close.
	go func() { done <- e.Serve() }()
	defer func() {
		e.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", e.HTTPAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// Both slots are taken (idle connections that sent nothing yet).
	third, err := net.Dial("tcp", e.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if _, err := io.WriteString(third, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _ := third.Read(make([]byte, 1)); n != 0 {
		t.Fatal("a third connection was served past max_http_conns 2")
	}
	_ = held[0].Close()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(newReader(third), nil)
	if err != nil {
		t.Fatalf("the waiting connection was not served once a slot freed: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// A bind failure is reported by New, and nothing is left listening.
func TestBindFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := testConfig(t)
	cfg.Listen.HTTP = ln.Addr().String()
	if _, err := New(cfg, Options{HealthInterval: -1}); err == nil {
		t.Fatal("New succeeded on a taken port")
	}
}

func newReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }

// The connection cap keeps CloseWrite on accepted TCP connections (net/http
// needs it to half-close before closing after an early answer), and frees
// a slot exactly once per connection however often it is closed.
func TestLimitListenerKeepsCloseWrite(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(inner, 1)
	defer ln.Close()
	for range 3 { // a slot freed by each close lets the next one in
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := sc.(interface{ CloseWrite() error }); !ok {
			t.Fatalf("%T hides CloseWrite", sc)
		}
		_ = sc.Close()
		_ = sc.Close()
		_ = c.Close()
	}
	if got := len(ln.(*limitListener).sem); got != 0 {
		t.Fatalf("%d slots held after every connection closed", got)
	}
}
