package h1client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// chanWriter hands every write to a channel (a copy) and fails once fail
// is closed.
type chanWriter struct {
	got  chan string
	fail chan struct{}
}

func (w chanWriter) Write(p []byte) (int, error) {
	select {
	case <-w.fail:
		return 0, errors.New("writer gave up")
	default:
	}
	w.got <- string(p)
	return len(p), nil
}

// pushed runs WriteTo on a goroutine; its result arrives on the channel.
func pushed(b io.Reader, w io.Writer) <-chan error {
	done := make(chan error, 1)
	// Owner: the test; stops when WriteTo returns (the body ends, fails or
	// is closed).
	go func() {
		_, err := b.(io.WriterTo).WriteTo(w)
		done <- err
	}()
	return done
}

// startPush sends req on tr and pushes the answer's body into a
// chanWriter on a goroutine.
func startPush(t *testing.T, tr *Transport, req *http.Request) (*http.Response, chanWriter, <-chan error) {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	w := chanWriter{got: make(chan string, 1), fail: make(chan struct{})}
	return resp, w, pushed(resp.Body, w)
}

func within(t *testing.T, done <-chan error, d time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("WriteTo still running after %v", d)
		return nil
	}
}

const sseHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// A pushed stream hands over each event as it arrives, parks with no read
// buffer between events, and leaves its connection reusable at the end:
// also after waiting longer than the stream check, whose deadline must not
// outlive the body.
func TestPushStreamsEventByEventAndReuses(t *testing.T) {
	next := make(chan struct{})
	u, accepted := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			io.WriteString(c, sseHead+chunk("data: 0\n\n"))
			for i := 1; i < 3; i++ {
				select {
				case <-next:
				case <-time.After(5 * time.Second):
					return
				}
				io.WriteString(c, chunk(fmt.Sprintf("data: %d\n\n", i)))
			}
			io.WriteString(c, "0\r\n\r\n")
		}
	})
	tr := New(Options{StreamCheckInterval: 20 * time.Millisecond})
	defer tr.Close()
	for round := range 2 {
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
		resp, w, done := startPush(t, tr, req)
		for i := range 3 {
			if got, want := <-w.got, fmt.Sprintf("data: %d\n\n", i); got != want {
				t.Fatalf("round %d: write %q, want %q", round, got, want)
			}
			if i == 1 && resp.Body.(*body).c.br != nil {
				// The second event came off the socket, after the head's
				// buffer was let go.
				t.Fatal("a parked pushed body still holds its read buffer")
			}
			if i < 2 {
				// Parked across several stream checks before the next event.
				time.Sleep(70 * time.Millisecond)
				next <- struct{}{}
			}
		}
		if err := within(t, done, 5*time.Second); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		resp.Body.Close()
		if n := tr.IdleConns(); n != 1 {
			t.Fatalf("round %d: %d idle connections after a clean end, want 1", round, n)
		}
		// Idle past the stream check: a deadline left armed would fail the
		// next round's request on this connection.
		time.Sleep(70 * time.Millisecond)
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("%d connections for two streams, want 1", n)
	}
}

// An upstream that dies mid-answer ends the push with an error, also when
// its FIN comes with its last bytes (no wake-up of its own: the stream
// check finds it), and the connection is not reused.
func TestPushUpstreamDiesMidStream(t *testing.T) {
	const check = 100 * time.Millisecond
	for i := range 20 {
		u, _ := rawServer(t, func(n int, c net.Conn) {
			if _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, sseHead+chunk("data: 0\n\n"))
			time.Sleep(20 * time.Millisecond) // the client parks
			// Half a chunk, then the close, in one go.
			io.WriteString(c, "20\r\ndata: cut")
		})
		tr := New(Options{StreamCheckInterval: check})
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		start := time.Now()
		_, err = resp.Body.(io.WriterTo).WriteTo(&got)
		took := time.Since(start)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("trial %d: err %v, want io.ErrUnexpectedEOF", i, err)
		}
		if took > check+time.Second {
			t.Fatalf("trial %d: the cut took %v to notice (check %v)", i, took, check)
		}
		if want := "data: 0\n\ndata: cut"; got.String() != want {
			t.Fatalf("trial %d: body %q, want %q", i, got.String(), want)
		}
		if n := tr.IdleConns(); n != 0 {
			t.Fatalf("trial %d: a cut connection went idle", i)
		}
		resp.Body.Close()
		tr.Close()
	}
}

// Cancelling the request, or closing the body from another goroutine,
// wakes a parked push at once (not at the next stream check).
func TestPushParkedWakesOnCancelAndClose(t *testing.T) {
	u, _ := rawServer(t, func(n int, c net.Conn) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, sseHead+chunk("data: 0\n\n"))
		io.Copy(io.Discard, c) // holds the stream until the client leaves
	})
	tr := New(Options{StreamCheckInterval: time.Hour})
	defer tr.Close()
	for _, how := range []string{"cancel", "close"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader("{}"))
		resp, w, done := startPush(t, tr, req)
		<-w.got
		time.Sleep(20 * time.Millisecond) // parked
		want := ErrBodyClosed
		if how == "cancel" {
			cancel()
			want = context.Canceled
		} else {
			resp.Body.Close()
		}
		if err := within(t, done, 2*time.Second); !errors.Is(err, want) {
			t.Fatalf("%s: err %v, want %v", how, err, want)
		}
		cancel()
		resp.Body.Close()
	}
	if n := tr.IdleConns(); n != 0 {
		t.Fatalf("%d idle connections after interrupted streams, want 0", n)
	}
}

// The writer's error ends the push with that error, and the connection,
// its answer unread, is closed.
func TestPushWriterErrorClosesConnection(t *testing.T) {
	u, accepted := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			io.WriteString(c, sseHead+chunk("data: 0\n\n")+chunk("data: 1\n\n")+"0\r\n\r\n")
		}
	})
	tr := New(Options{})
	defer tr.Close()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	w := chanWriter{got: make(chan string, 1), fail: make(chan struct{})}
	close(w.fail)
	if _, err := resp.Body.(io.WriterTo).WriteTo(w); err == nil || err.Error() != "writer gave up" {
		t.Fatalf("err %v, want the writer's", err)
	}
	if _, err := resp.Body.Read(make([]byte, 8)); err == nil {
		t.Fatal("Read after a failed push succeeded")
	}
	resp.Body.Close()
	if n := tr.IdleConns(); n != 0 {
		t.Fatalf("%d idle connections after a failed push, want 0", n)
	}
	req, _ = http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
	if resp, err = tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(readOnly{resp.Body})
	resp.Body.Close()
	if err != nil || string(b) != "data: 0\n\ndata: 1\n\n" {
		t.Fatalf("second request: %q, %v", b, err)
	}
	if n := accepted.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the failed one closed)", n)
	}
}

// readOnly hides a body's WriteTo: the bytes come through Read.
type readOnly struct{ io.Reader }

// Whatever an upstream answers, pushing the body (WriteTo over a real
// socket) and reading it (Read, net/http's framing) give the same bytes,
// the same verdict and the same decision on the connection.
func FuzzPushMatchesRead(f *testing.F) {
	for _, s := range []string{
		sseHead + chunk("data: {\"a\":1}\n\n") + chunk("data: [DONE]\n\n") + "0\r\n\r\n",
		sseHead + "5;ext=1\r\nhello\r\n0\r\nX-Trailer: a\r\n\r\n",
		sseHead + "5\r\nhelloXX",
		sseHead + "5\nhello\r\n0\r\n\r\n",
		sseHead + "0\r\n\r\nHTTP/1.1 200 OK\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
		"HTTP/1.0 200 OK\r\n\r\nten",
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(7))
	}
	f.Fuzz(func(t *testing.T, answer []byte, split uint8) {
		type verdict struct {
			body   string
			ok     bool
			reused bool
		}
		run := func(push bool) verdict {
			var answered atomic.Bool
			u, accepted := rawServer(t, func(n int, c net.Conn) {
				br := bufio.NewReader(c)
				for {
					// The connection closes when no request follows soon:
					// that ends a close-delimited or cut-off answer.
					c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
					if _, err := readRequest(br); err != nil {
						return
					}
					if answered.Swap(true) {
						io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
						continue
					}
					// In two writes, so that the answer comes in pieces.
					cut := min(int(split), len(answer))
					c.Write(answer[:cut])
					time.Sleep(time.Millisecond)
					c.Write(answer[cut:])
				}
			})
			tr := New(Options{StreamCheckInterval: 50 * time.Millisecond, MaxResponseHeaderBytes: 4 << 10})
			defer tr.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader("{}"))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				return verdict{body: "roundtrip failed"}
			}
			var got strings.Builder
			if push {
				_, err = resp.Body.(io.WriterTo).WriteTo(&got)
			} else {
				_, err = io.Copy(&got, readOnly{resp.Body})
			}
			resp.Body.Close()
			if ctx.Err() != nil {
				t.Fatalf("push=%v: the answer %q held the client until its deadline", push, answer)
			}
			// A second request tells whether the connection was kept.
			req, _ = http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if resp, rerr := tr.RoundTrip(req); rerr == nil {
				resp.Body.Close()
			}
			return verdict{body: got.String(), ok: err == nil, reused: accepted.Load() == 1}
		}
		pull, push := run(false), run(true)
		if pull != push {
			t.Fatalf("answer %q split at %d: Read gives %+v, WriteTo %+v", answer, split, pull, push)
		}
	})
}

// readSyscalls is this process's count of read system calls (Linux).
func readSyscalls(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no syscr in /proc/self/io")
	return 0
}

// A parked push is checked once after its last bytes (the read that finds
// the socket empty also proves no FIN is pending), not once per interval:
// 10,000 quiet streams must not cost 10,000 reads a second.
func TestPushQuietStreamIsCheckedOnce(t *testing.T) {
	u, _ := rawServer(t, func(n int, c net.Conn) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, sseHead+chunk("data: 0\n\n"))
		io.Copy(io.Discard, c) // quiet until the client leaves
	})
	const check = 10 * time.Millisecond
	tr := New(Options{StreamCheckInterval: check})
	defer tr.Close()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
	resp, w, done := startPush(t, tr, req)
	<-w.got
	time.Sleep(5 * check) // the one check
	before := readSyscalls(t)
	time.Sleep(30 * check)
	if n := readSyscalls(t) - before; n > 3 {
		t.Fatalf("%d reads in %v of a quiet stream checked every %v, want none", n, 30*check, check)
	}
	resp.Body.Close()
	if err := within(t, done, 2*time.Second); !errors.Is(err, ErrBodyClosed) {
		t.Fatalf("err %v, want ErrBodyClosed", err)
	}
}

// floodWriter counts what it is given and runs at once the action given
// for the byte count at which it fires.
type floodWriter struct {
	n    atomic.Int64
	at   int64
	fire func()
	once atomic.Bool
}

func (w *floodWriter) Write(p []byte) (int, error) {
	if w.n.Add(int64(len(p))) >= w.at && w.once.CompareAndSwap(false, true) {
		w.fire()
	}
	return len(p), nil
}

// An upstream that keeps the socket full never lets a read come back
// short; a cancel, or a Close from another goroutine, must still end the
// push within a bounded number of bytes (not when the upstream pauses,
// which it may never do).
func TestPushEndsOnCancelWhileSocketStaysFull(t *testing.T) {
	u, _ := rawServer(t, func(n int, c net.Conn) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
		block := []byte(strings.Repeat("data: flood\n\n", 5000))
		for {
			if _, err := c.Write(block); err != nil {
				return
			}
		}
	})
	tr := New(Options{StreamCheckInterval: time.Hour})
	defer tr.Close()
	const at = 8 << 20
	for _, how := range []string{"cancel", "close"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader("{}"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		w := &floodWriter{at: at, fire: cancel}
		want := context.Canceled
		if how == "close" {
			want = ErrBodyClosed
			w.fire = func() {
				// Owner: the test; Close returns at once, even while
				// this writer waits for it.
				go func() { resp.Body.Close(); close(closed) }()
				<-closed
			}
		} else {
			close(closed)
		}
		done := pushed(resp.Body, w)
		if err := within(t, done, 10*time.Second); !errors.Is(err, want) {
			t.Fatalf("%s: err %v after %d bytes, want %v", how, err, w.n.Load(), want)
		}
		// What the wake-up under way still reads (the writer fired inside
		// it), and no further wake-up: the cancellation is looked at on
		// each yield, whenever the cancel hook's goroutine gets to run.
		if n, most := w.n.Load(), int64(at+(maxReadsPerWake+1)*pushBufSize); n > most {
			t.Fatalf("%s: %d bytes relayed after the end at %d, want at most %d", how, n-at, at, most-at)
		}
		<-closed
		cancel()
		resp.Body.Close()
	}
	if n := tr.IdleConns(); n != 0 {
		t.Fatalf("%d idle connections after interrupted streams, want 0", n)
	}
}

// Close from another goroutine returns at once even while the pushing
// writer is blocked (the caller's writer is the caller's to unblock); the
// push then ends with ErrBodyClosed and the connection is closed.
func TestPushCloseDoesNotWaitForBlockedWriter(t *testing.T) {
	gone := make(chan struct{})
	u, _ := rawServer(t, func(n int, c net.Conn) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, sseHead+chunk("data: 0\n\n"))
		io.Copy(io.Discard, c)
		close(gone)
	})
	tr := New(Options{StreamCheckInterval: time.Hour})
	defer tr.Close()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	w := &floodWriter{at: 1, fire: func() { close(entered); <-release }}
	done := pushed(resp.Body, w)
	<-entered
	closeDone := make(chan struct{})
	// Owner: the test; ends when Close returns.
	go func() { resp.Body.Close(); close(closeDone) }()
	select {
	case <-closeDone:
	case <-time.After(2 * time.Second):
		close(release)
		t.Fatal("Close blocked behind the pushing writer")
	}
	close(release)
	if err := within(t, done, 2*time.Second); !errors.Is(err, ErrBodyClosed) {
		t.Fatalf("err %v, want ErrBodyClosed", err)
	}
	select {
	case <-gone:
	case <-time.After(2 * time.Second):
		t.Fatal("connection still open after Close")
	}
}
