package h1client

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A connection whose answer ends after CloseIdleConnections (or Close) is
// closed, not kept: the caller has let go of the upstream (a provider
// removed or moved elsewhere) and nothing would use it before the idle
// timeout. A request after that keeps connections again, as net/http's
// Transport does.
func TestConnectionEndingAfterCloseIsNotKept(t *testing.T) {
	rest := make(chan struct{})
	closed := make(chan struct{}, 4)
	u, _ := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readRequest(br); err != nil {
				closed <- struct{}{}
				return
			}
			if n == 1 {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nok")
				<-rest
				io.WriteString(c, "ok")
				n = 0
				continue
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tr := New(Options{})
	defer tr.Close()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	close(rest)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "okok" {
		t.Fatalf("body %q, %v", b, err)
	}
	if n := tr.IdleConns(); n != 0 {
		t.Fatalf("%d idle connections after Close, want 0", n)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream's connection still open 5 s after its answer ended")
	}

	// The transport is used again: what ends from now on is kept.
	for range 2 {
		req, _ = http.NewRequest(http.MethodGet, u, nil)
		resp, err = tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n := tr.IdleConns(); n != 1 {
			t.Fatalf("%d idle connections after a later request, want 1", n)
		}
	}
}
