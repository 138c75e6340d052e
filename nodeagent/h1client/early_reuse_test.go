package h1client

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// An answer that came whole while the request body was still being
// written, whose body then failed, leaves a connection the upstream still
// expects the rest of the request on (and which the failure interrupted):
// it is closed, not kept, however cleanly the answer was read.
func TestFailedRequestBodyAfterWholeAnswerIsNotKept(t *testing.T) {
	u, _ := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		// Answer at once, without reading the streamed body.
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, br)
	})
	tr, conns := interruptTransport()
	defer tr.Close()
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", u, pr)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ic := <-conns
	// The request body fails: the write ends and interrupts the
	// connection.
	pw.CloseWithError(errors.New("producer failed"))
	select {
	case <-ic.interrupted:
	case <-time.After(10 * time.Second):
		t.Fatal("the failed request body did not interrupt its connection")
	}
	// The answer came with its head: it is read without the socket.
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "ok" {
		t.Fatalf("answer %q, %v", b, err)
	}
	if n := tr.IdleConns(); n != 0 {
		t.Fatalf("%d idle connections: one whose request was not written whole was kept", n)
	}
}
