package nodewire

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// A session that ends because its peer stopped reading (the writer's
// write timed out) still records that as its close cause, which the edge
// reports as "node stopped reading"; but its streams fail as streams of a
// lost connection, not as if their own deadline had passed: the edge
// takes a stream error that is os.ErrDeadlineExceeded for its response
// wait running out (answered as a timeout, never failed over), where a
// lost node's exchanges fail over to another node.
func TestStreamsOfAStalledSessionAreNotTimeouts(t *testing.T) {
	old := muxWriteTimeout
	muxWriteTimeout = 100 * time.Millisecond
	t.Cleanup(func() { muxWriteTimeout = old })

	peer, s := tcpPair(t)
	edge := muxServer(s)
	t.Cleanup(func() { _ = edge.Close() })

	// One exchange waits for its answer, far inside its own deadline.
	waiting, err := edge.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waiting.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	wst := newStream(waiting, 0)
	_ = wst.SetReadDeadline(time.Now().Add(time.Minute))
	recvErr := make(chan error, 1)
	go func() { // Owner: the test; ends when the stream fails.
		_, err := wst.Recv()
		recvErr <- err
	}()

	// Another is open and idle: nothing waits on it when the session
	// closes, so its error is the one the close gives it.
	idle, err := edge.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idle.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}

	// Another sends more than the sockets hold to a peer that granted it
	// the window and then reads nothing.
	bulk, err := edge.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bulk.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write(rawHeader(muxTypeWindow, 0, bulk.StreamID(), 1<<30)); err != nil {
		t.Fatal(err)
	}
	writeErr := make(chan error, 1)
	go func() { // Owner: the test; ends when the session fails.
		chunk := make([]byte, 1<<20)
		for {
			if _, err := bulk.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
	}()

	select {
	case <-edge.CloseChan():
	case <-time.After(waitLong):
		t.Fatal("session still open with a peer that reads nothing")
	}
	if cause := edge.err(); !errors.Is(cause, os.ErrDeadlineExceeded) {
		t.Fatalf("close cause %v, want the write's timeout", cause)
	}
	for what, ch := range map[string]chan error{"blocked Recv": recvErr, "blocked Write": writeErr} {
		var err error
		select {
		case err = <-ch:
		case <-time.After(waitLong):
			t.Fatalf("%s still waiting after the session closed", what)
		}
		var ne net.Error
		if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("%s: %v reads as the stream's own deadline passing", what, err)
		}
		if !errors.Is(err, errSessionClosed) {
			t.Fatalf("%s: %v, want errSessionClosed", what, err)
		}
	}
	// A stream op after the close says the same.
	if _, err := idle.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) || !errors.Is(err, errSessionClosed) {
		t.Fatalf("read of an idle stream after close: %v", err)
	}
	if _, err := waiting.Write([]byte("more")); errors.Is(err, os.ErrDeadlineExceeded) || !errors.Is(err, errSessionClosed) {
		t.Fatalf("write after close: %v", err)
	}
	_ = peer.Close()
}
