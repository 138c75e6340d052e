package edgeapp

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// serveEdge builds and serves an edge until the test's cleanup closes it
// (and checks that Serve then returned no error).
func serveEdge(t *testing.T, cfg *config.Edge, opts Options) *Edge {
	t.Helper()
	e, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	// Owner: the test; ends at e.Close (cleanup).
	go func() { done <- e.Serve() }()
	t.Cleanup(func() {
		e.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

// oneNodeYAML is the nodes and models of an edge config: node a (token
// tok) with one mock provider m of capacity 1, serving model m.
const oneNodeYAML = `
nodes:
  - id: a
    token: tok
    providers:
      - {name: m, type: mock, capacity: 1}
models:
  - name: m
    providers: [{node: a, provider: m, target: x}]
`

// edgeFile writes yaml to an edge config file of the test's and loads it
// (both the file, for reloads, and the config).
func edgeFile(t *testing.T, yaml string) (string, *config.Edge) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadEdge(file)
	if err != nil {
		t.Fatal(err)
	}
	return file, cfg
}

// listen.max_http_conns: connections beyond the cap wait (in the kernel's
// backlog) until one of the first ones closes; none is refused.
func TestMaxHTTPConns(t *testing.T) {
	e := serveEdge(t, testConfig(t), Options{HealthInterval: -1})
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

// listen.max_pending_handshakes and listen.max_node_conns reach the node
// listener: a connection beyond either bound is closed at once, unread,
// while the ones within it stay open waiting for their handshake.
func TestNodeListenerBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*config.Edge)
	}{
		{"max_pending_handshakes", func(c *config.Edge) { c.Listen.MaxPendingHandshakes = 2 }},
		{"max_node_conns", func(c *config.Edge) { c.Listen.MaxNodeConns = 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			tc.set(cfg)
			e := serveEdge(t, cfg, Options{HealthInterval: -1, HandshakeTimeout: 30 * time.Second})
			var conns []net.Conn
			for range 3 {
				c, err := net.Dial("tcp", e.NodeAddr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns = append(conns, c)
			}
			// The third is past the bound of 2: closed without a byte.
			_ = conns[2].SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := conns[2].Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("third connection: read %v, want EOF (closed at the bound of 2)", err)
			}
			// The first two are still waiting for their handshake.
			for i, c := range conns[:2] {
				_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				var ne net.Error
				if _, err := c.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
					t.Fatalf("connection %d within the bound: read %v, want a timeout (still open)", i, err)
				}
			}
		})
	}
}

// A reload names the changed keys it cannot apply (listeners, logger, …)
// instead of dropping them silently, and applies the rest.
func TestReloadNamesRestartKeys(t *testing.T) {
	const base = `
listen:
  http: 127.0.0.1:0
  node: 127.0.0.1:0
log:
  level: info
` + oneNodeYAML
	file, cfg := edgeFile(t, base)
	e, err := New(cfg, Options{HealthInterval: -1, ConfigFile: file})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	rep, err := e.Reload()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.RestartRequired) != 0 {
		t.Fatalf("unchanged file: restart_required %v", rep.RestartRequired)
	}

	changed := strings.Replace(base, "level: info", "level: debug", 1)
	changed = strings.Replace(changed, "  node: 127.0.0.1:0", "  node: 127.0.0.1:0\n  max_http_conns: 7\nauth:\n  api_keys: [k1]", 1)
	if err := os.WriteFile(file, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err = e.Reload()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"listen", "log"}; !slices.Equal(rep.RestartRequired, want) {
		t.Fatalf("restart_required %v, want %v (auth applies at once)", rep.RestartRequired, want)
	}
	// auth.api_keys did apply: /v1/models now wants the key.
	rec := httptest.NewRecorder()
	e.Server.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("/v1/models without a key after the reload: %d, want 401", rec.Code)
	}
}
