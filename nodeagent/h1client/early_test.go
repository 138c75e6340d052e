package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// answerEarly is an upstream that reads a request's head only, answers
// with answer at once and then neither reads the rest of the body nor
// closes until the test ends (a server that rejects a request by its
// headers, or one that reads it only after answering).
func answerEarly(t *testing.T, answer string) string {
	t.Helper()
	held := make(chan struct{})
	u, _ := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, answer)
		<-held
	})
	t.Cleanup(func() { close(held) })
	return u
}

// An upstream that answers a large request before reading its body (a
// 413, a 401 from an auth layer) is heard at once, as with net/http's
// Transport, instead of the request waiting on a write that cannot end
// until its deadline; the connection, whose request was never written
// whole, is not kept.
func TestEarlyAnswerToLargeBody(t *testing.T) {
	for _, answer := range []string{
		"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 9\r\n\r\ntoo large",
		"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n",
	} {
		u := answerEarly(t, answer)
		tr := New(Options{})
		// Built before the clock starts: under -race on a busy machine
		// 32 MiB take seconds.
		prompt := bytes.Repeat([]byte("p"), 32<<20)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, release, err := NewRequest(ctx, http.MethodPost, u, prompt)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		release()
		if err != nil {
			t.Fatalf("%q: round trip failed after %v: %v", answer, time.Since(start), err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%q: the answer took %v", answer, d)
		}
		want, _ := http.ReadResponse(bufio.NewReader(bytes.NewReader([]byte(answer))), nil)
		wantBody, _ := io.ReadAll(want.Body)
		if err != nil || resp.StatusCode != want.StatusCode || !bytes.Equal(b, wantBody) {
			t.Fatalf("%q: got %d %q, %v", answer, resp.StatusCode, b, err)
		}
		if n := tr.IdleConns(); n != 0 {
			t.Fatalf("%q: %d idle connections; the request was not written whole", answer, n)
		}
		cancel()
		tr.Close()
	}
}

// A keep-alive upstream that answers first and reads the body after (here
// only once the client has taken the answer): the answer is read while
// the body is still being written, and the connection is not reused for
// the next request (it would be written behind the rest of this body).
func TestAnswerBeforeBodyWrittenIsNotReused(t *testing.T) {
	taken := make(chan struct{})
	u, accepted := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if req.ContentLength > 1<<20 {
				select {
				case <-taken:
				case <-time.After(5 * time.Second):
				}
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
		}
	})
	tr, cl := newTestTransport(Options{})
	defer tr.Close()
	prompt := bytes.Repeat([]byte("p"), 32<<20) // before the clock starts, as above
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, release, _ := NewRequest(ctx, http.MethodPost, u, prompt)
	resp, err := cl.Do(req)
	release()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	close(taken)
	if err != nil || string(b) != "ok" {
		t.Fatalf("got %q, %v", b, err)
	}
	if got := post(t, cl, u, "small"); got != "200 ok" {
		t.Fatalf("next request: %s", got)
	}
	if n := accepted.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the first request was not written whole when its answer ended)", n)
	}
}

// failingBody yields n bytes, then fails.
type failingBody struct{ n int }

var errBodyFailed = errors.New("request body failed")

func (f *failingBody) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errBodyFailed
	}
	k := min(len(p), f.n)
	clear(p[:k])
	f.n -= k
	return k, nil
}

// A request body that fails while it is written concurrently with the
// wait for the answer ends the request with the body's error at once: the
// upstream, still waiting for the rest, would never answer.
func TestConcurrentWriteBodyErrorEndsRequest(t *testing.T) {
	u, _ := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if req, err := http.ReadRequest(br); err == nil {
			io.Copy(io.Discard, req.Body)
		}
	})
	tr := New(Options{})
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, &failingBody{n: 200 << 10})
	req.ContentLength = 1 << 20
	start := time.Now()
	_, err := tr.RoundTrip(req)
	// net/http's Request.Write does not wrap the body's error.
	if err == nil || !strings.Contains(err.Error(), errBodyFailed.Error()) {
		t.Fatalf("got %v, want the body's error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the body's error took %v", d)
	}
}

// A streamed request body (unknown length) that the upstream answers
// before it ends: once the answer's body is closed, the request body is
// closed too, so the write still waiting on it ends then, not whenever the
// body's producer gets round to ending it.
func TestEarlyAnswerClosesStreamedRequestBody(t *testing.T) {
	u := answerEarly(t, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n")
	tr := New(Options{})
	defer tr.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, u, pr)
	if err != nil {
		t.Fatal(err)
	}
	// Owner: the test; ends once the piece is read or the pipe closed.
	// The body then neither ends nor fails until it is closed.
	go func() { _, _ = pw.Write([]byte("the first piece of a body that never ends")) }()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", resp.StatusCode)
	}
	resp.Body.Close()
	requireBodyClosed(t, pw, "the answer ended")
}

// requireBodyClosed fails unless the request body fed by pw was closed:
// the producer's next write fails with io.ErrClosedPipe instead of waiting
// for (or being taken by) the transport's write goroutine. after says
// what should have closed it.
func requireBodyClosed(t *testing.T, pw *io.PipeWriter, after string) {
	t.Helper()
	done := make(chan error, 1)
	// Owner: the test; ends when the write fails, is read, or at pw.Close.
	go func() { _, err := pw.Write([]byte("x")); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("producer's write after %s: %v, want io.ErrClosedPipe", after, err)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("the request body was left open after %s: its write goroutine waits on the producer", after)
	}
}

// The same, with an answer that has a body the caller closes unread (a
// status it does not want the text of): closing the answer's body closes
// the request body, as reading it to its end does.
func TestEarlyAnswerClosedUnreadClosesStreamedRequestBody(t *testing.T) {
	const piece = "the first piece of a body that never ends"
	// The upstream answers on the head, then reads the first piece and
	// holds the connection.
	gotPiece, held := make(chan struct{}), make(chan struct{})
	u, _ := rawServer(t, func(_ int, c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 17\r\n\r\nrequest too large")
		if _, err := io.ReadFull(req.Body, make([]byte, len(piece))); err == nil {
			close(gotPiece)
		}
		<-held
	})
	t.Cleanup(func() { close(held) })
	tr := New(Options{})
	defer tr.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, u, pr)
	if err != nil {
		t.Fatal(err)
	}
	// Owner: the test; ends once the piece is read or the pipe closed.
	go func() { _, _ = pw.Write([]byte(piece)) }()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The write has sent the first piece and waits on the producer.
	select {
	case <-gotPiece:
	case <-time.After(5 * time.Second):
		t.Fatal("the first piece never reached the upstream")
	}
	resp.Body.Close()
	requireBodyClosed(t, pw, "the answer was closed")
}
