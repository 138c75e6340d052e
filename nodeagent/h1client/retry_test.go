package h1client

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// errBroken is a write that failed on a connection the upstream dropped.
var errBroken = errors.New("connection broken")

// breakableConn lets writes through until broken, then lets budget more
// bytes through and fails: the upstream's end of a kept-alive connection
// gone while a request is written on it. It hides the socket (no
// syscall.Conn), so the idle probe passes and the failure is met by the
// request itself.
type breakableConn struct {
	net.Conn
	mu     sync.Mutex
	broken bool
	budget int // guarded by mu; bytes let through once broken
}

func (c *breakableConn) breakAfter(n int) {
	c.mu.Lock()
	c.broken, c.budget = true, n
	c.mu.Unlock()
}

func (c *breakableConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.broken {
		return c.Conn.Write(p)
	}
	if len(p) <= c.budget {
		c.budget -= len(p)
		return c.Conn.Write(p)
	}
	n, _ := c.Conn.Write(p[:c.budget])
	c.budget = 0
	return n, errBroken
}

// breakableTransport dials breakableConns and counts the dials.
func breakableTransport(t *testing.T) (*Transport, *atomic.Int64, func() *breakableConn) {
	t.Helper()
	var (
		mu    sync.Mutex
		last  *breakableConn
		dials atomic.Int64
	)
	var d net.Dialer
	tr := New(Options{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		dials.Add(1)
		bc := &breakableConn{Conn: nc}
		mu.Lock()
		last = bc
		mu.Unlock()
		return bc, nil
	}})
	t.Cleanup(func() { tr.Close() })
	return tr, &dials, func() *breakableConn {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// okServer answers every request "ok" on kept-alive connections.
func okServer(t *testing.T) string {
	t.Helper()
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})
	return srv.URL
}

func roundTrip(tr *Transport, req *http.Request) (string, error) {
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// A request whose write fails on a kept-alive connection is resent once on
// a fresh one only when none of it was written and its body can be sent
// again; one part of which left is not, whatever its method (as
// http.Transport: the upstream may be acting on it).
func TestRetryOnBrokenKeptAliveConnection(t *testing.T) {
	u := okServer(t)
	newReq := func(method string, body io.Reader) *http.Request {
		req, err := http.NewRequest(method, u, body)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	cases := []struct {
		name      string
		req       func() *http.Request
		budget    int // bytes of the request that leave before the write fails
		wantRetry bool
	}{
		{"post nothing written", func() *http.Request { return newReq("POST", strings.NewReader("prompt")) }, 0, true},
		{"post partly written", func() *http.Request { return newReq("POST", strings.NewReader("prompt")) }, 10, false},
		{"get partly written", func() *http.Request { return newReq("GET", nil) }, 10, false},
		{"post without GetBody nothing written", func() *http.Request {
			req := newReq("POST", io.NopCloser(strings.NewReader("prompt")))
			req.ContentLength = int64(len("prompt"))
			return req
		}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, dials, last := breakableTransport(t)
			if b, err := roundTrip(tr, newReq("GET", nil)); err != nil || b != "ok" {
				t.Fatalf("first request: %q, %v", b, err)
			}
			if tr.IdleConns() != 1 {
				t.Fatalf("%d idle connections after the first request, want 1", tr.IdleConns())
			}
			last().breakAfter(tc.budget)
			b, err := roundTrip(tr, tc.req())
			if tc.wantRetry {
				if err != nil || b != "ok" {
					t.Fatalf("resent request: %q, %v", b, err)
				}
				if n := dials.Load(); n != 2 {
					t.Fatalf("%d dials, want 2 (one resend)", n)
				}
				return
			}
			if !errors.Is(err, errBroken) {
				t.Fatalf("got %q, %v; want the write's error", b, err)
			}
			if n := dials.Load(); n != 1 {
				t.Fatalf("%d dials, want 1 (no resend)", n)
			}
		})
	}
}

// A request that fails on a connection dialled for it is not resent: the
// upstream is not one that dropped an idle connection but one that fails
// requests, and a second try would only double its load.
func TestNoRetryOnFreshConnection(t *testing.T) {
	u, accepted := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil || n == 1 {
			return // the first connection: closed without an answer
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	tr := New(Options{})
	defer tr.Close()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := roundTrip(tr, req); err == nil {
		t.Fatalf("got %q; want the failure of the only connection", b)
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("%d connections, want 1 (no resend on a fresh connection)", n)
	}
}

// A POST that carries an Idempotency-Key may be sent twice: when a
// kept-alive connection closes under it before any answer, it is resent on
// a fresh one, as a GET would be.
func TestRetryIdempotencyKeyPost(t *testing.T) {
	u, accepted := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		if n == 1 {
			// The next request on the first connection is read and
			// dropped unanswered.
			_, _ = readRequest(br)
		}
	})
	tr := New(Options{})
	defer tr.Close()
	post := func(key string) (string, error) {
		req, err := http.NewRequest("POST", u, strings.NewReader("prompt"))
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		return roundTrip(tr, req)
	}
	if b, err := post(""); err != nil || b != "ok" {
		t.Fatalf("first POST: %q, %v", b, err)
	}
	if b, err := post("k1"); err != nil || b != "ok" {
		t.Fatalf("POST with Idempotency-Key on a connection closed under it: %q, %v; want it resent", b, err)
	}
	if n := accepted.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (one resend)", n)
	}
}

// A kept-alive connection that fails after part of the answer came is not
// a connection the upstream closed while idle: the request reached it, and
// it is not resent, even when idempotent.
func TestNoRetryAfterPartOfTheAnswer(t *testing.T) {
	u, accepted := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		if n == 1 {
			if _, err := readRequest(br); err == nil {
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-")
			}
		}
	})
	tr := New(Options{})
	defer tr.Close()
	get := func() (string, error) {
		req, err := http.NewRequest("GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return roundTrip(tr, req)
	}
	if b, err := get(); err != nil || b != "ok" {
		t.Fatalf("first GET: %q, %v", b, err)
	}
	if b, err := get(); err == nil {
		t.Fatalf("GET whose answer was cut off: %q; want an error", b)
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("%d connections, want 1 (no resend)", n)
	}
}
