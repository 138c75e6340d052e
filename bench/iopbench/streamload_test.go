//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/bench/mockup"
)

func loadFor(t *testing.T, base string, n, chunks int, interval time.Duration) loadSpec {
	t.Helper()
	addr, req, err := streamRequest(target{name: "test", url: base, streamModel: mockup.Model}, chunks, interval, 0)
	if err != nil {
		t.Fatal(err)
	}
	return loadSpec{addr: addr, req: req, n: n, chunks: chunks, gaps: true, timeout: 20 * time.Second}
}

func checkStreams(t *testing.T, res []streamResult, lines, gaps int) {
	t.Helper()
	for i, r := range res {
		if r.err != nil || !r.done || r.lines != lines || len(r.gaps) != gaps || r.ttft <= 0 {
			t.Fatalf("stream %d: err %v done %v lines %d gaps %d ttft %s", i, r.err, r.done, r.lines, len(r.gaps), r.ttft)
		}
	}
}

// Paced streams from the mock: every data line counted, the gaps among the
// first chunks lines timed, [DONE] seen; directly and through Go's reverse
// proxy, which frames the chunks anew.
func TestStreamLoadMock(t *testing.T) {
	mock := startMock(t)
	u, _ := url.Parse(mock.URL)
	// The harness's goproxy, whose full-duplex serving this also covers
	// (see newGoproxy).
	proxy := httptest.NewServer(newGoproxy(u))
	defer proxy.Close()
	for _, base := range []string{mock.URL, proxy.URL} {
		spec := loadFor(t, base, 30, 5, 10*time.Millisecond)
		spec.ramp = 30 * time.Millisecond
		res, err := runStreamLoad(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		// 5 chunks, the usage chunk, [DONE]; gaps between the first 5.
		checkStreams(t, res, 7, 4)
		// The schedule is absolute (chunk i at start + i×10 ms, start after
		// the request arrived), so gaps after a late first chunk are short
		// (under -race on a busy machine it can be 25 ms late), but the
		// fifth chunk never arrives before 40 ms after the request was sent.
		for _, r := range res {
			var sum time.Duration
			for _, g := range r.gaps {
				sum += g
			}
			if r.ttft+sum < 40*time.Millisecond || sum > 2*time.Second {
				t.Fatalf("%s: first chunk after %v, then gaps %v, for a 10 ms pacing", base, r.ttft, r.gaps)
			}
		}
	}
}

// script is a raw HTTP server that answers every request with the same
// writes, pausing between them so that they arrive in separate reads.
func script(t *testing.T, writes ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	// Owner: the test; stops when the listener is closed at cleanup.
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			// Owner: the test; ends after its scripted answer.
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				for _, w := range writes {
					if _, err := io.WriteString(c, w); err != nil {
						return
					}
					time.Sleep(3 * time.Millisecond)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

const sseHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

func chunked(s string) string { return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n" }

// Every framing the paths answer with, split at awkward places, read by
// streamLoad and by streamOnce (net/http): both see the same.
func TestStreamLoadFraming(t *testing.T) {
	ev := "data: {\"x\":1}\n\n"
	cases := []struct {
		name   string
		writes []string
		lines  int
		ok     bool
	}{
		{"chunked", []string{sseHead + chunked(ev), chunked(ev), chunked("data: [DONE]\n\n") + "0\r\n\r\n"}, 3, true},
		{"head split", []string{"HTTP/1.1 200 OK\r\nTransfer-Enc", "oding: chunked\r\n\r", "\n" + chunked(ev) + chunked("data:[DONE]\n\n") + "0\r\n\r\n"}, 2, true},
		{"prefix and line split", []string{sseHead + "8\r\ndata: {\"\r\n", "3\r\nx\":\r\n", "2\r\n1}\r\n", "3\r\n\n\nd\r\n", "4\r\nata:\r\n", "9\r\n [DONE]\n\n\r\n", "0\r\n\r\n"}, 2, true},
		{"chunk extension and trailer", []string{sseHead + "f;name=v\r\n" + ev + "\r\n" + chunked("data: [DONE]\n\n") + "0\r\nX-Trailer: 1\r\n\r\n"}, 2, true},
		{"interim 100", []string{"HTTP/1.1 100 Continue\r\n\r\n", sseHead + chunked(ev+"data: [DONE]\n\n") + "0\r\n\r\n"}, 2, true},
		{"content-length", []string{"HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(2*len(ev)+len("data: [DONE]\n\n")) + "\r\n\r\n" + ev, ev, "data: [DONE]\n\n"}, 3, true},
		{"until close, last line unterminated", []string{"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + ev, "data: [DONE]"}, 2, true},
		{"not data lines", []string{sseHead + chunked(": comment data:\nevent: data:\n"+ev) + chunked("data: [DONE]\n\n") + "0\r\n\r\n"}, 2, true},
		{"no done", []string{sseHead + chunked(ev) + chunked("data: [DONE ]x\n\n") + "0\r\n\r\n"}, 2, false},
		{"status", []string{"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"}, 0, false},
		{"cut", []string{sseHead + chunked(ev) + chunked("data: [DONE]\n\n")}, 2, false},
		{"bad chunk", []string{sseHead + "zz\r\n"}, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := script(t, c.writes...)
			res, err := runStreamLoad(context.Background(), loadFor(t, base, 2, 10, 0))
			if err != nil {
				t.Fatal(err)
			}
			once := streamOnce(context.Background(), newClient(), target{url: base, streamModel: mockup.Model}, 10, 0)
			for i, r := range res {
				if (r.err == nil) != c.ok || r.lines != c.lines || (r.err == nil) != (once.err == nil) || r.lines != once.lines || r.done != once.done {
					t.Fatalf("stream %d: err %v lines %d done %v; want ok %v lines %d; streamOnce: err %v lines %d done %v",
						i, r.err, r.lines, r.done, c.ok, c.lines, once.err, once.lines, once.done)
				}
				if r.err == nil && len(r.gaps) != r.lines-1 {
					t.Fatalf("stream %d: %d gaps for %d lines", i, len(r.gaps), r.lines)
				}
			}
		})
	}
}

func TestStreamLoadRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ln.Close()
	res, err := runStreamLoad(context.Background(), loadFor(t, base, 3, 5, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !errors.Is(r.err, net.ErrClosed) && (r.err == nil || !strings.Contains(r.err.Error(), "connect")) {
			t.Fatalf("err %v, want a connect error", r.err)
		}
	}
}

// Cancelling the run ends every stream at once; the open and failed
// counters follow (cut streams are not failures).
func TestStreamLoadCancel(t *testing.T) {
	mock := startMock(t)
	var open, failed atomic.Int64
	spec := loadFor(t, mock.URL, 50, 1000, time.Second)
	spec.timeout, spec.gaps, spec.open, spec.failed = 0, false, &open, &failed
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []streamResult, 1)
	// Owner: the test; ends when ctx is cancelled below.
	go func() {
		res, _ := runStreamLoad(ctx, spec)
		done <- res
	}()
	deadline := time.Now().Add(10 * time.Second)
	for open.Load() < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams open", open.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case res := <-done:
		for _, r := range res {
			if !errors.Is(r.err, context.Canceled) || r.lines != 1 {
				t.Fatalf("err %v lines %d", r.err, r.lines)
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not end after cancel")
	}
	if open.Load() != 0 || failed.Load() != 0 {
		t.Fatalf("open %d failed %d after cancel", open.Load(), failed.Load())
	}
}

func TestStreamLoadTimeout(t *testing.T) {
	mock := startMock(t)
	spec := loadFor(t, mock.URL, 5, 1000, time.Second)
	spec.timeout = 100 * time.Millisecond
	start := time.Now()
	res, err := runStreamLoad(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s", d)
	}
	for _, r := range res {
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Fatalf("err %v", r.err)
		}
	}
}

func TestStreamRequest(t *testing.T) {
	addr, req, err := streamRequest(target{url: "http://127.0.0.1:8080", streamModel: "m"}, 7, 20*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if addr != netip.MustParseAddrPort("127.0.0.1:8080") {
		t.Fatalf("addr %s", addr)
	}
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(string(req))))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || r.Host != "127.0.0.1:8080" ||
		string(body) != string(pacedBody("m", mockup.DefaultChunks, 7, 20*time.Millisecond, 0)) {
		t.Fatalf("request %+v body %s", r, body)
	}
}

// Decoding a chunk allocates nothing: the per-chunk path of every stream.
func TestStreamLoadFeedAllocs(t *testing.T) {
	spec := loadSpec{addr: netip.MustParseAddrPort("127.0.0.1:1"), n: 1, chunks: 1 << 20, gaps: true}
	res := make([]streamResult, 1)
	l, err := newLoop(spec, res)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	l.streams[0].state, l.streams[0].doneAt = stHead, -1
	res[0].gaps = make([]time.Duration, 0, 1024)
	now := time.Now()
	if err := l.feed(0, []byte(sseHead), now); err != nil {
		t.Fatal(err)
	}
	ev := []byte(chunked("data: {\"choices\":[{\"delta\":{\"content\":\" token\"}}]}\n\n"))
	allocs := testing.AllocsPerRun(500, func() {
		now = now.Add(20 * time.Millisecond)
		if err := l.feed(0, ev, now); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 || res[0].lines < 500 {
		t.Fatalf("%.1f allocations per chunk, %d lines", allocs, res[0].lines)
	}
}

// A padded paced body stays a valid chat request, its prompt pad bytes
// longer, with the pacing members the mock reads.
func TestPacedBodyPadding(t *testing.T) {
	plain := pacedBody("m", 8, 3, 20*time.Millisecond, 0)
	padded := pacedBody("m", 8, 3, 20*time.Millisecond, 16<<10)
	var req struct {
		Messages []struct{ Content string } `json:"messages"`
		Chunks   int                        `json:"bench_chunks"`
	}
	if err := json.Unmarshal(padded, &req); err != nil {
		t.Fatalf("padded body is not JSON: %v", err)
	}
	if d := len(padded) - len(plain); d != 16<<10 {
		t.Fatalf("padding added %d bytes, want %d", d, 16<<10)
	}
	if len(req.Messages) != 2 || len(req.Messages[0].Content) < 16<<10 || req.Chunks != 3 {
		t.Fatalf("the pad is not in the system message: %d messages", len(req.Messages))
	}
}
