package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"weak"
)

// The body arrives whole with its Content-Length, through this transport
// and through net/http's (the fallback for TLS and proxies); once the
// response head is in and release has run, neither the request nor the
// response the caller still reads from keeps the bytes.
func TestNewRequestLetsGoOfTheBody(t *testing.T) {
	var got sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(r.URL.Path, string(b)+" "+r.Header.Get("Content-Length"))
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
	}))
	defer srv.Close()
	tr := New(Options{})
	defer tr.Close()
	std := &http.Transport{}
	defer std.CloseIdleConnections()
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{{"h1client", tr}, {"nethttp", std}} {
		t.Run(c.name, func(t *testing.T) {
			body := bytes.Repeat([]byte("p"), 1<<20)
			wp := weak.Make(&body[0])
			req, release, err := NewRequest(context.Background(), http.MethodPost, srv.URL+"/"+c.name, body)
			if err != nil {
				t.Fatal(err)
			}
			body = nil
			resp, err := (&http.Client{Transport: c.rt}).Do(req)
			release()
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			// The caller keeps req and resp (and through resp, its
			// Request) while the answer is read; the bytes must go.
			if _, err := req.GetBody(); !errors.Is(err, errBodyReleased) {
				t.Fatalf("GetBody after release: %v", err)
			}
			if !eventually(func() bool { return wp.Value() == nil }) {
				t.Fatal("the request body is still reachable while the response is read")
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil || string(b) != "data: 1\n\n" {
				t.Fatalf("response %q, %v", b, err)
			}
			if v, _ := got.Load("/" + c.name); v != strings.Repeat("p", 1<<20)+" 1048576" {
				t.Fatalf("the upstream got %d bytes", len(v.(string)))
			}
			runtime.KeepAlive(req)
		})
	}
}

// eventually runs the collector until cond holds (a weak pointer reads
// nil once its object was found unreachable), a few cycles at most.
func eventually(cond func() bool) bool {
	for range 5 {
		if cond() {
			return true
		}
		runtime.GC()
	}
	return cond()
}

// A request resent on a fresh connection (its kept-alive one died under
// it without an answer; an Idempotency-Key makes a POST safe to resend)
// gets its body again from GetBody: release comes only after Do, so
// resends inside Do are whole.
func TestNewRequestBodyIsResentWhole(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	u, accepted := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(req.Body)
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
			if n == 1 && i == 1 {
				return // the second request on the first connection: dropped unanswered
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	for i, want := range []string{"first", "second"} {
		req, release, err := NewRequest(context.Background(), http.MethodPost, u, []byte(want))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", want)
		resp, err := cl.Do(req)
		release()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(bodies, ",") != "first,second,second" || accepted.Load() != 2 {
		t.Fatalf("the upstream got %q over %d connections, want the second resent whole on a second", bodies, accepted.Load())
	}
}

// onceReader reads its bytes once, drops them at the end and on Close, and
// tolerates Close racing a Read.
func TestOnceReader(t *testing.T) {
	r := &onceReader{b: []byte("abcdef")}
	p := make([]byte, 4)
	if n, err := r.Read(p); n != 4 || err != nil || string(p[:n]) != "abcd" {
		t.Fatalf("first read %d %v", n, err)
	}
	if n, err := r.Read(p); n != 2 || err != nil || string(p[:n]) != "ef" || r.b != nil {
		t.Fatalf("second read %d %v, left %v", n, err, r.b)
	}
	if n, err := r.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("read at the end: %d %v", n, err)
	}
	// Closed before its end, it has nothing more to give and holds nothing.
	r = &onceReader{b: []byte("abcdef")}
	_ = r.Close()
	if n, err := r.Read(p); n != 0 || err != io.EOF || r.b != nil {
		t.Fatalf("read after Close: %d %v, left %v", n, err, r.b)
	}
	r = &onceReader{b: make([]byte, 1<<20)}
	var wg sync.WaitGroup
	wg.Add(1)
	// Owner: the test; ends at EOF (the Close below ends it early).
	go func() {
		defer wg.Done()
		_, _ = io.Copy(io.Discard, r)
	}()
	_ = r.Close()
	wg.Wait()
	if r.b != nil {
		t.Fatal("Close left the bytes")
	}
	if req, release, err := NewRequest(context.Background(), http.MethodGet, "http://127.0.0.1/", nil); err != nil || req.Body != nil || req.GetBody != nil {
		t.Fatalf("an empty body: %v, body %v", err, req.Body)
	} else {
		release()
	}
}

// writeCounter counts the writes on a connection.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A request with a 40 KiB body (a long prompt) leaves in one write, head
// and body together: a 4 KiB buffer wrote it in eleven, and net/http's own
// head flush before a body it does not know made it two.
func TestLongRequestLeavesInOneWrite(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	var writes atomic.Int64
	var d net.Dialer
	tr, cl := newTestTransport(Options{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{Conn: c, writes: &writes}, nil
	}})
	defer tr.Close()
	req, release, err := NewRequest(context.Background(), http.MethodPost, srv.URL, bytes.Repeat([]byte("p"), 40<<10))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Do(req)
	release()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" || writes.Load() != 1 {
		t.Fatalf("answer %q after %d writes, want one", b, writes.Load())
	}
}
