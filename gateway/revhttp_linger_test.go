package gateway_test

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"testing"
	"time"
)

// After an early answer (a wrong key here) the edge reads and discards
// the rest of the body for a while before it closes, as a lingering close
// does: a client still sending its body can finish its write and read the
// 401 instead of a reset. Closing at once with unread data would reset the
// connection, failing the client's write (and possibly losing the answer).
func TestEarlyAnswerLingersForTheBody(t *testing.T) {
	addr := slowBodyEdge(t, 60)
	c := rawConn(t, addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-bad\r\nContent-Length: 30000000\r\n\r\n{")
	br := bufio.NewReader(c)
	// The bound is for a hung edge; the answer comes at once.
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("answer: %v, %v", statusOf(resp), err)
	}
	// The client's send buffer is fixed small (autotuning off), so that
	// 4 MiB is far more than it and the edge's receive buffer (which grows
	// only as the edge reads) hold: the write ends only if the edge reads
	// it. The linger reads for 2 s from the answer; 16 MiB (the size
	// before, for autotuned buffers) did not cross within that alone under
	// -race at load 20, 4 MiB leaves four times the margin.
	if err := c.(*net.TCPConn).SetWriteBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	_ = c.SetWriteDeadline(time.Now().Add(15 * time.Second))
	if _, err := c.Write(bytes.Repeat([]byte("x"), 4<<20)); err != nil {
		t.Fatalf("the rest of the body after a 401: %v", err)
	}
}
