package h1client

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// A body closed early gives nothing more, even the part of it that came
// with the head and sits in the connection's buffer.
func TestReadAfterCloseGivesNothing(t *testing.T) {
	u, _ := keepOpenServer(t, "okok", "")
	tr := New(Options{})
	defer tr.Close()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 2)
	if _, err := io.ReadFull(resp.Body, p); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n, err := resp.Body.Read(p); n != 0 || !errors.Is(err, ErrBodyClosed) {
		t.Fatalf("Read after Close: %d %q, %v; want ErrBodyClosed", n, p[:n], err)
	}
}

// A request whose context ended before it was sent is not sent, not even
// on a kept-alive connection ready to take it.
func TestCancelledRequestIsNotSent(t *testing.T) {
	var (
		mu     sync.Mutex
		active = map[net.Conn]int{}
		closed = make(chan net.Conn, 4)
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		switch s {
		case http.StateActive:
			mu.Lock()
			active[c]++
			mu.Unlock()
		case http.StateClosed:
			closed <- c
		}
	}
	srv.Start()
	defer srv.Close()
	tr := New(Options{})
	defer tr.Close()
	req, err := http.NewRequest("GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := roundTrip(tr, req); err != nil || b != "ok" {
		t.Fatalf("first request: %q, %v", b, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, err = http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v, want context.Canceled", err)
	}
	// The kept-alive connection was closed: once the server has read to
	// its end, it has seen every byte that was sent on it.
	var c net.Conn
	select {
	case c = <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection of the cancelled request was not closed")
	}
	mu.Lock()
	n := active[c]
	mu.Unlock()
	if n != 1 {
		t.Fatalf("the server read %d requests on the connection, want 1 (the cancelled one was sent)", n)
	}
}

// A body that failed keeps failing with the same error: a caller that
// reads once more is not told something else (or handed bytes).
func TestBodyErrorIsSticky(t *testing.T) {
	u, _ := rawServer(t, func(_ int, c net.Conn) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		// Cut off: two bytes of four, then the close.
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nok")
	})
	tr := New(Options{})
	defer tr.Close()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut-off body: %v, want io.ErrUnexpectedEOF", err)
	}
	p := make([]byte, 8)
	if n, err := resp.Body.Read(p); n != 0 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Read after the failure: %d, %v; want the same failure", n, err)
	}
}
