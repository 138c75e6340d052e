package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// countingServer is an httptest server that counts the connections it
// accepted.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// rawServer accepts connections and hands each to serve on its own
// goroutine; it counts accepts.
func rawServer(t *testing.T, serve func(n int, c net.Conn)) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	wg.Add(1)
	// Owner: the test; stops when the listener is closed in Cleanup.
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(accepted.Add(1))
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			wg.Add(1)
			// Owner: the test; stops when serve returns (Cleanup closes c).
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(n, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String(), &accepted
}

// readRequest reads one request (head and body) from br.
func readRequest(br *bufio.Reader) (*http.Request, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, req.Body)
	return req, err
}

func newTestTransport(o Options) (*Transport, *http.Client) {
	tr := New(o)
	return tr, &http.Client{Transport: tr}
}

func post(t *testing.T, cl *http.Client, u, body string) string {
	t.Helper()
	resp, err := cl.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

func TestKeepAliveReusesOneConnection(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"got":%q,"ua":%q}`, b, r.Header.Get("User-Agent"))
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	for i := range 20 {
		got := post(t, cl, srv.URL+"/v1/chat", fmt.Sprintf("req-%d", i))
		want := fmt.Sprintf(`200 {"got":"req-%d","ua":"Go-http-client/1.1"}`, i)
		if got != want {
			t.Fatalf("request %d: got %s, want %s", i, got, want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 20 sequential requests, want 1", n)
	}
	if n := tr.IdleConns(); n != 1 {
		t.Fatalf("idle connections %d, want 1", n)
	}
}

func TestStreamArrivesChunkByChunk(t *testing.T) {
	next := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	resp, err := cl.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("data: %d\n", i); line != want {
			t.Fatalf("line %q, want %q", line, want)
		}
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		next <- struct{}{} // the next event is sent only after this one arrived
	}
	if _, err := io.ReadAll(br); err != nil {
		t.Fatal(err)
	}
	if n := tr.IdleConns(); n != 1 {
		t.Fatalf("idle connections %d after a whole stream, want 1", n)
	}
}

// The upstream closing an idle connection (a keep-alive timeout) must not
// cost the next request, even a POST, which is never resent.
func TestUpstreamClosedIdleConnection(t *testing.T) {
	u, accepted := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// Keep-alive not honoured: close right after the answer.
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	for i := range 3 {
		if got := post(t, cl, u, "x"); got != "200 ok" {
			t.Fatalf("request %d: %s", i, got)
		}
		// Let the FIN arrive; the probe must then see it.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && accepted.Load() < int64(i+1) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := accepted.Load(); n != 3 {
		t.Fatalf("%d connections, want 3", n)
	}
}

// A connection that dies under a request (the probe passed, then the
// upstream closed without answering) is retried once for an idempotent
// request and never for a POST.
func TestRetryOnlyWhatIsSafe(t *testing.T) {
	u, accepted := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
		if n%2 == 0 {
			return // a fresh connection for the retry: answered, then closed
		}
		// The next request on this connection is read and dropped.
		readRequest(br)
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()

	get := func() (string, error) {
		resp, err := cl.Get(u)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if b, err := get(); err != nil || b != "first" {
		t.Fatalf("first GET: %q, %v", b, err)
	}
	if b, err := get(); err != nil || b != "first" {
		t.Fatalf("second GET (retried): %q, %v", b, err)
	}
	if n := accepted.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (one retry)", n)
	}

	// Now a POST on a kept-alive connection (the retry's, whose server
	// goroutine closed after answering: use a fresh server round instead).
	tr.CloseIdleConnections()
	if got := post(t, cl, u, "a"); got != "200 first" { // connection 3 (odd): keeps reading
		t.Fatalf("POST: %s", got)
	}
	_, err := cl.Post(u, "application/json", strings.NewReader("b"))
	if err == nil {
		t.Fatal("POST on a connection that died under it succeeded; it must not be resent")
	}
	if n := accepted.Load(); n != 3 {
		t.Fatalf("%d connections, want 3 (no retry of the POST)", n)
	}
}

func TestCancelMidBodyUnblocksAndDiscardsConnection(t *testing.T) {
	closed := make(chan struct{})
	u, _ := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n7\r\ndata: 1\r\n")
		// Hold the stream until the client goes away.
		io.Copy(io.Discard, c)
		close(closed)
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader("{}"))
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != "data: 1" {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err = resp.Body.Read(buf)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("read took %s to notice the cancellation", d)
	}
	resp.Body.Close()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the upstream connection was not closed after the cancellation")
	}
	if n := tr.IdleConns(); n != 0 {
		t.Fatalf("idle connections %d, want 0", n)
	}
}

func TestConcurrentCloseUnblocksRead(t *testing.T) {
	u, _ := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		io.Copy(io.Discard, c)
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	resp, err := cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	// Owner: the test; stops when Close fails the blocked Read.
	go func() {
		_, err := resp.Body.Read(make([]byte, 16))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	resp.Body.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrBodyClosed) {
			t.Fatalf("read: %v, want ErrBodyClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not unblock the Read")
	}
	if _, err := resp.Body.Read(make([]byte, 1)); !errors.Is(err, ErrBodyClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

func TestEarlyCloseDoesNotReuse(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 64<<10))
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	for range 2 {
		resp, err := cl.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Read(make([]byte, 10))
		resp.Body.Close()
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (a half-read body's connection is closed)", n)
	}
	if n := tr.IdleConns(); n != 0 {
		t.Fatalf("idle %d, want 0", n)
	}
}

func TestNoBodyResponseFreesConnectionAtOnce(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	for range 3 {
		resp, err := cl.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("status %d", resp.StatusCode)
		}
		// Not read, not closed yet: the connection is idle already.
		if n := tr.IdleConns(); n != 1 {
			t.Fatalf("idle %d before Close, want 1", n)
		}
		resp.Body.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

func TestCloseDelimitedBody(t *testing.T) {
	u, accepted := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}")
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	for range 2 {
		if got := post(t, cl, u, "{}"); got != `200 {"a":1}` {
			t.Fatalf("got %s", got)
		}
	}
	if n := accepted.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (a close-delimited body ends its connection)", n)
	}
}

func TestInformationalResponses(t *testing.T) {
	u, _ := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	if got := post(t, cl, u, "{}"); got != "200 ok" {
		t.Fatalf("got %s", got)
	}
}

func TestHeaderBound(t *testing.T) {
	u, _ := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("a", 100) + "\r\n"
		for range 1000 {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	tr, cl := newTestTransport(Options{MaxResponseHeaderBytes: 8 << 10})
	defer tr.Close()
	_, err := cl.Get(u)
	if !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("got %v, want ErrHeaderTooLarge", err)
	}
}

func TestMalformedResponses(t *testing.T) {
	for name, answer := range map[string]string{
		"garbage status":   "HTTP/1.1 OK-ish\r\n\r\n",
		"not http":         "SSH-2.0-OpenSSH\r\n",
		"bad chunk size":   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
		"short length":     "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
		"conflicting size": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
	} {
		t.Run(name, func(t *testing.T) {
			u, _ := rawServer(t, func(_ int, c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := readRequest(br); err != nil {
					return
				}
				io.WriteString(c, answer)
			})
			tr, cl := newTestTransport(Options{})
			defer tr.Close()
			resp, err := cl.Get(u)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				t.Fatal("a malformed response read without error")
			}
			if n := tr.IdleConns(); n != 0 {
				t.Fatalf("idle %d after a malformed response, want 0", n)
			}
		})
	}
}

func TestIdleTimeoutAndBound(t *testing.T) {
	release := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "ok")
	})
	tr, cl := newTestTransport(Options{MaxIdlePerHost: 2, IdleTimeout: 100 * time.Millisecond})
	defer tr.Close()
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		// Owner: the test; stops when the handler is released.
		go func() {
			defer wg.Done()
			resp, err := cl.Get(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := tr.IdleConns(); n != 2 {
		t.Fatalf("idle %d after 5 concurrent requests, want the bound 2", n)
	}
	deadline := time.Now().Add(3 * time.Second)
	for tr.IdleConns() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("idle connections not reaped: %d", tr.IdleConns())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fallbackCounter counts what the transport hands on.
type fallbackCounter struct {
	http.RoundTripper
	n atomic.Int64
}

func (f *fallbackCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	f.n.Add(1)
	return f.RoundTripper.RoundTrip(r)
}

func TestFallbackForTLSAndProxies(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls") }))
	defer tlsSrv.Close()
	plain, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain") })
	fb := &fallbackCounter{RoundTripper: tlsSrv.Client().Transport}
	defer tlsSrv.Client().CloseIdleConnections()
	proxied := ""
	tr, cl := newTestTransport(Options{Fallback: fb, Proxy: func(r *http.Request) (*url.URL, error) {
		if r.URL.Path == "/via-proxy" {
			proxied = r.URL.Path
			return url.Parse(plain.URL) // the fallback would use it; here it just counts
		}
		return nil, nil
	}})
	defer tr.Close()
	resp, err := cl.Get(tlsSrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "tls" || fb.n.Load() != 1 {
		t.Fatalf("https: %q, fallback used %d times", b, fb.n.Load())
	}
	if got := post(t, cl, plain.URL, ""); got != "200 plain" || fb.n.Load() != 1 {
		t.Fatalf("plain: %s, fallback used %d times", got, fb.n.Load())
	}
	resp, err = cl.Get(plain.URL + "/via-proxy")
	if err == nil {
		resp.Body.Close()
	}
	if proxied != "/via-proxy" || fb.n.Load() != 2 {
		t.Fatalf("proxied request not handed to the fallback (%d)", fb.n.Load())
	}
}

func TestDialErrorAndCancelledRequest(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	if _, err := cl.Get("http://" + addr); err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr, nil)
	if _, err := cl.Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
}

// A reaper round that expires some of a host's idle connections and keeps
// younger ones re-arms for the oldest kept one (it used to read a slot
// its own compaction had cleared).
func TestIdleReapKeepsYoungerConnections(t *testing.T) {
	releaseFirst, releaseSecond := make(chan struct{}), make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" {
			<-releaseFirst
		} else {
			<-releaseSecond
		}
		io.WriteString(w, "ok")
	})
	tr, cl := newTestTransport(Options{MaxIdlePerHost: 4, IdleTimeout: 150 * time.Millisecond})
	defer tr.Close()
	var wg sync.WaitGroup
	for _, path := range []string{"/first", "/second"} {
		wg.Add(1)
		// Owner: the test; stops when its handler is released.
		go func() {
			defer wg.Done()
			resp, err := cl.Get(srv.URL + path)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	time.Sleep(30 * time.Millisecond) // both requests on their own connection
	close(releaseFirst)
	time.Sleep(100 * time.Millisecond) // the second goes idle 100 ms after the first
	close(releaseSecond)
	wg.Wait()
	waitIdle := func(want int) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for tr.IdleConns() != want {
			if time.Now().After(deadline) {
				t.Fatalf("idle connections %d, want %d", tr.IdleConns(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitIdle(1) // the first expired, the second kept
	waitIdle(0) // and reaped in a later round
}
