package h1client

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// keepOpenServer answers every request on a connection with body and
// keeps the connection open whatever the request asked (an upstream that
// ignores Connection: close); each answer is followed by extra, in the
// same write, so that the bytes arrive together.
func keepOpenServer(t *testing.T, body, extra string) (string, func() int64) {
	t.Helper()
	answer := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s%s", len(body), body, extra)
	u, accepted := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	})
	return u, accepted.Load
}

// A request that asked for its connection to be closed (req.Close, sent as
// Connection: close) does not leave it for the next request, even when the
// upstream keeps it open.
func TestRequestCloseIsNotKept(t *testing.T) {
	u, accepted := keepOpenServer(t, "ok", "")
	tr := New(Options{})
	defer tr.Close()
	for i := range 2 {
		req, err := http.NewRequest("GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Close = true
		if b, err := roundTrip(tr, req); err != nil || b != "ok" {
			t.Fatalf("request %d: %q, %v", i, b, err)
		}
		if n := tr.IdleConns(); n != 0 {
			t.Fatalf("request %d: %d idle connections, want 0", i, n)
		}
	}
	if n := accepted(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// Bytes after the end of an answer are not the answer to a next request:
// the connection is closed, not kept idle.
func TestBytesAfterTheAnswerAreNotKept(t *testing.T) {
	u, _ := keepOpenServer(t, "ok", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nforged")
	tr := New(Options{})
	defer tr.Close()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := roundTrip(tr, req); err != nil || b != "ok" {
		t.Fatalf("request: %q, %v", b, err)
	}
	if n := tr.IdleConns(); n != 0 {
		t.Fatalf("%d idle connections after an answer with bytes beyond it, want 0", n)
	}
}
