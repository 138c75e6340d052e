package mockup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func post(t *testing.T, url, body string, h map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestCompletion(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	resp := post(t, srv.URL, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
	var doc struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Object != "chat.completion" || len(doc.Choices) != 1 || doc.Choices[0].Message.Content == "" || doc.Usage.CompletionTokens != 64 {
		t.Fatalf("unexpected completion: %+v", doc)
	}
}

func TestStreamPacing(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	start := time.Now()
	resp := post(t, srv.URL, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
		map[string]string{HeaderChunks: "5", HeaderInterval: "10"})
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, strings.TrimSpace(data))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// 5 chunks, the usage chunk, [DONE]; 4 pauses of 10 ms.
	if len(events) != 7 || events[6] != "[DONE]" || !strings.Contains(events[5], `"completion_tokens":5`) || !strings.Contains(events[4], `"finish_reason":"stop"`) {
		t.Fatalf("events: %q", events)
	}
	for _, e := range events[:6] {
		if !json.Valid([]byte(e)) {
			t.Fatalf("invalid JSON event %q", e)
		}
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("stream took %s, want ≥ 40ms", d)
	}
}

func TestBadPacing(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	resp := post(t, srv.URL, `{"stream":true}`, map[string]string{HeaderChunks: "0"})
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
}

// countingClient dials through a counter, so a test can tell whether
// requests reused one connection.
func countingClient(dials *atomic.Int64) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		DisableCompression: true,
	}}
}

// readEvents reads a whole SSE body and returns its data payloads.
func readEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var events []string
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, strings.TrimSpace(data))
		}
		if err == io.EOF {
			return events
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// newRequest is a request with body and the headers h.
func newRequest(t *testing.T, method, url, body string, h map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	return req
}

func do(t *testing.T, cl *http.Client, method, url, body string, h map[string]string) (*http.Response, []byte) {
	t.Helper()
	req := newRequest(t, method, url, body, h)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func waitInFlight(t *testing.T, want int64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for streamsInFlight.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams in flight, want %d", streamsInFlight.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// After a stream the connection serves every endpoint and further streams
// (the mock's own request loop), and stays one connection throughout. The
// requests go over one dialled connection, not through http.Transport:
// the transport drops a connection whose request write it has not seen
// acknowledged within 50 ms of the answer (maxWriteWaitBeforeConnReuse),
// which a loaded machine exceeds, so a count of its dials measured the
// machine's load as well as the mock.
func TestKeepAliveAfterStream(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Bounds a mock that stops answering; not a timing assertion.
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	do := func(method, path, body string, h map[string]string) (*http.Response, []byte) {
		t.Helper()
		return doOn(t, conn, br, method, srv.URL+path, body, h)
	}
	const path = "/v1/chat/completions"
	pace := map[string]string{HeaderChunks: "3", HeaderInterval: "1"}
	for round := range 3 {
		resp, b := do(http.MethodPost, path, `{"stream":true}`, pace)
		if ev := readEvents(t, bytes.NewReader(b)); resp.StatusCode != 200 || len(ev) != 4 || ev[3] != "[DONE]" {
			t.Fatalf("round %d: stream %d %q", round, resp.StatusCode, ev)
		}
		resp, b = do(http.MethodPost, path, `{"stream":false}`, nil)
		if resp.StatusCode != 200 || !bytes.Equal(b, Completion) || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("round %d: completion %d %s", round, resp.StatusCode, b)
		}
		if resp, _ = do(http.MethodGet, "/health", "", nil); resp.StatusCode != 200 {
			t.Fatalf("health %d", resp.StatusCode)
		}
		if resp, b = do(http.MethodGet, "/metrics", "", nil); resp.StatusCode != 200 || !bytes.Contains(b, []byte("vllm:num_requests_running")) {
			t.Fatalf("metrics %d %s", resp.StatusCode, b)
		}
		if resp, b = do(http.MethodGet, "/v1/models", "", nil); resp.StatusCode != 200 || !bytes.Contains(b, []byte(Model)) {
			t.Fatalf("models %d %s", resp.StatusCode, b)
		}
		if resp, _ = do(http.MethodPost, path, `{"stream":true}`, map[string]string{HeaderInterval: "x"}); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("bad pacing %d", resp.StatusCode)
		}
		if resp, _ = do(http.MethodGet, "/nope", "", nil); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("unknown path %d", resp.StatusCode)
		}
	}
	waitInFlight(t, 0)
}

// doOn sends one HTTP/1.1 request on conn and reads its whole answer from
// br. An answer that closes the connection (Connection: close, or the
// mock hanging up) fails the test: the next request would need a new one.
func doOn(t *testing.T, conn net.Conn, br *bufio.Reader, method, url, body string, h map[string]string) (*http.Response, []byte) {
	t.Helper()
	req := newRequest(t, method, url, body, h)
	if err := req.Write(conn); err != nil {
		t.Fatalf("%s %s: write: %v (the connection was not kept)", method, url, err)
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("%s %s: read: %v (the connection was not kept)", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	if resp.Close {
		t.Fatalf("%s %s: the answer closes the connection", method, url)
	}
	return resp, b
}

// A client that leaves mid-stream frees the stream at once.
func TestDisconnectFreesStream(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	base := streamsInFlight.Load()
	var dials atomic.Int64
	cl := countingClient(&dials)
	defer cl.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
	req.Header.Set(HeaderChunks, "100000")
	req.Header.Set(HeaderInterval, "5000") // long: only the disconnect can end it soon
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	waitInFlight(t, base+1)
	resp.Body.Close() // closes the connection: the body was not read to the end
	waitInFlight(t, base)
}

// The wire format: the exact head, one chunk per event, the tail with the
// usage chunk and [DONE], the zero chunk; then, on the same connection, a
// pipelined request sent during the stream is answered after it.
func TestStreamWire(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := `{"stream":true,"stream_options":{"include_usage":true}}`
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Bench-Chunks: 3\r\nX-Bench-Interval-Ms: 20\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := io.WriteString(conn, req+"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" ||
		resp.Header.Get("Cache-Control") != "no-cache" || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || resp.Close {
		t.Fatalf("head: %d %v close=%v", resp.StatusCode, resp.Header, resp.Close)
	}
	// Read the raw chunked framing.
	want := [][]byte{firstChunk[1], midChunk[1], append(append(append([]byte(nil), lastChunk[1]...), usageChunk(3)...), doneEvent...)}
	for i, w := range want {
		size, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
		if err != nil || int(n) != len(w) {
			t.Fatalf("chunk %d: size line %q, want %x", i, size, len(w))
		}
		got := make([]byte, n+2)
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:n], w) || string(got[n:]) != "\r\n" {
			t.Fatalf("chunk %d: %q", i, got)
		}
	}
	if end, err := br.ReadString('\n'); err != nil || end != "0\r\n" {
		t.Fatalf("terminator %q %v", end, err)
	}
	if end, err := br.ReadString('\n'); err != nil || end != "\r\n" {
		t.Fatalf("terminator end %q %v", end, err)
	}
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("pipelined health: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	waitInFlight(t, 0)
}

// The hijacked stream carries the same events as the net/http one that
// serves a non-hijackable writer.
func TestStreamMatchesFallback(t *testing.T) {
	body := `{"stream":true,"stream_options":{"include_usage":true}}`
	h := map[string]string{HeaderChunks: "7", HeaderInterval: "0"}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	Handler().ServeHTTP(rec, req)
	want := readEvents(t, rec.Body)
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	var dials atomic.Int64
	cl := countingClient(&dials)
	defer cl.CloseIdleConnections()
	_, b := do(t, cl, http.MethodPost, srv.URL+"/v1/chat/completions", body, h)
	if got := readEvents(t, bytes.NewReader(b)); strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) != 9 {
		t.Fatalf("hijacked %q\nfallback %q", got, want)
	}
}

// An unpaced stream larger than the socket buffers, read by a client that
// stalls first, arrives whole (the pacer retries a full socket).
func TestUnpacedStalledReader(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	var dials atomic.Int64
	cl := countingClient(&dials)
	defer cl.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
	req.Header.Set(HeaderChunks, "40000") // ~9 MB
	req.Header.Set(HeaderInterval, "0")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	time.Sleep(200 * time.Millisecond)
	if ev := readEvents(t, resp.Body); len(ev) != 40001 || ev[40000] != "[DONE]" {
		t.Fatalf("%d events", len(ev))
	}
	waitInFlight(t, 0)
}

// Go's reverse proxy in front of the mock (the goproxy path) relays streams
// and may reuse its upstream connection after each: the mock keeps it.
func TestReverseProxyReuse(t *testing.T) {
	up := httptest.NewServer(Handler())
	defer up.Close()
	u, _ := url.Parse(up.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	// The proxy's idle upstream connection is closed at the end, or the
	// mock's side of it (a hijacked connection) waits out its idle timeout
	// after the test.
	upw := newUpstreamWatch()
	defer upw.tr.CloseIdleConnections()
	rp.Transport = upw
	rp.FlushInterval = -1
	// Full duplex, or net/http closes the request body when the proxy
	// writes the response head while the transport may still be reading it
	// for its end-of-body check, and the transport then drops the upstream
	// connection mid-answer ("http: invalid Read on closed Body").
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	}))
	defer px.Close()
	var dials atomic.Int64
	cl := countingClient(&dials)
	defer cl.CloseIdleConnections()
	for range 3 {
		resp, b := do(t, cl, http.MethodPost, px.URL+"/v1/chat/completions", `{"stream":true}`, map[string]string{HeaderChunks: "4", HeaderInterval: "2"})
		if ev := readEvents(t, bytes.NewReader(b)); resp.StatusCode != 200 || len(ev) != 5 || ev[4] != "[DONE]" {
			t.Fatalf("via proxy: %d %q", resp.StatusCode, ev)
		}
	}
	// The mock kept every connection: it neither announced a close nor
	// hung up. Whether the proxy's transport then reused it is the
	// transport's (and the machine's load's) business: see upstreamWatch.
	if a, h := upw.announced.Load(), upw.hungUp.Load(); a != 0 || h != 0 {
		t.Fatalf("the mock closed the proxy's connection: %d answers with Connection: close, %d hang-ups (%d dials)", a, h, upw.dials.Load())
	}
	waitInFlight(t, 0)
}

// An HTTP/1.0 client gets the net/http stream (no chunked encoding).
func TestHTTP10Stream(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := `{"stream":true}`
	_, _ = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.0\r\nX-Bench-Chunks: 2\r\nX-Bench-Interval-Ms: 1\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev := readEvents(t, resp.Body); resp.StatusCode != 200 || len(ev) != 3 || ev[2] != "[DONE]" {
		t.Fatalf("%d %q", resp.StatusCode, ev)
	}
}

// The pacing members in the body win over the headers (a gateway forwards
// the body, not every header); either may be absent.
func TestPacingSources(t *testing.T) {
	hdr := http.Header{}
	hdr.Set(HeaderChunks, "9")
	hdr.Set(HeaderInterval, "7")
	for _, tc := range []struct {
		body     string
		h        http.Header
		chunks   int
		interval time.Duration
		bad      bool
	}{
		{`{"stream":true}`, http.Header{}, DefaultChunks, DefaultInterval, false},
		{`{"stream":true}`, hdr, 9, 7 * time.Millisecond, false},
		{`{"stream":true,"bench_chunks":3,"bench_interval_ms":0}`, hdr, 3, 0, false},
		{`{"stream":true, "bench_chunks" : 12 ,"x":1}`, http.Header{}, 12, DefaultInterval, false},
		{`{"bench_interval_ms":250}`, hdr, 9, 250 * time.Millisecond, false},
		{`{"bench_chunks":0}`, http.Header{}, 0, 0, true},
		{`{"bench_chunks":"5"}`, http.Header{}, 0, 0, true},
		{`{"bench_interval_ms":-1}`, http.Header{}, 0, 0, true},
		{`{"bench_chunks":100001}`, http.Header{}, 0, 0, true},
	} {
		chunks, interval, err := pacing([]byte(tc.body), tc.h)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: no error", tc.body)
			}
			continue
		}
		if err != nil || chunks != tc.chunks || interval != tc.interval {
			t.Errorf("%s: %d %s %v, want %d %s", tc.body, chunks, interval, err, tc.chunks, tc.interval)
		}
	}
}

// NetHTTPHandler streams the same events as the hijacking Handler, written
// by net/http (the memory floor's server): the same bytes, no hijack.
func TestNetHTTPHandlerMatchesHandler(t *testing.T) {
	body := `{"stream":true,"stream_options":{"include_usage":true},"bench_chunks":5,"bench_interval_ms":1}`
	var got [2][]string
	for i, h := range []http.Handler{Handler(), NetHTTPHandler()} {
		srv := httptest.NewServer(h)
		var dials atomic.Int64
		cl := countingClient(&dials)
		_, b := do(t, cl, http.MethodPost, srv.URL+"/v1/chat/completions", body, nil)
		got[i] = readEvents(t, bytes.NewReader(b))
		cl.CloseIdleConnections()
		srv.Close()
	}
	if strings.Join(got[0], "\n") != strings.Join(got[1], "\n") || len(got[1]) != 7 {
		t.Fatalf("hijacked %q\nnet/http %q", got[0], got[1])
	}
	for _, e := range got[1][:5] {
		if !strings.Contains(e, `"usage":null`) {
			t.Fatalf("chunk without \"usage\":null although include_usage was asked: %q", e)
		}
	}
	// While a NetHTTPHandler stream is open, no hijacked stream exists.
	waitInFlight(t, 0) // the hijacked streams above have ended
	srv := httptest.NewServer(NetHTTPHandler())
	defer srv.Close()
	const base = 0
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"stream":true,"bench_chunks":3,"bench_interval_ms":300}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if n := streamsInFlight.Load(); n != base {
		t.Fatalf("%d hijacked streams in flight during a net/http stream, want %d", n, base)
	}
}
