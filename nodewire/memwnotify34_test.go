package nodewire

import (
	"errors"
	"io"
	"testing"
	"time"
)

// hasWNotify reports whether st has made its write-notify channel.
func hasWNotify(st *muxStream) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.wnotify != nil
}

// A stream whose writes never wait (a request within the window, an
// answer, a write deadline set and cleared as the edge's request send
// does, a half-close) makes no write-notify channel on either side: a
// held stream keeps none (96 B).
func TestStreamWithoutWaitingWriterHasNoWriteNotify(t *testing.T) {
	client, server := muxPair(t)
	a, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	_ = a.SetWriteDeadline(time.Now().Add(waitLong))
	if _, err := a.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	_ = a.SetWriteDeadline(time.Time{})
	b := acceptWithin(t, server)
	_ = b.SetReadDeadline(time.Now().Add(waitLong))
	buf := make([]byte, 64)
	if n, err := b.Read(buf); err != nil || string(buf[:n]) != "request" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if _, err := b.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	_ = a.SetReadDeadline(time.Now().Add(waitLong))
	if n, err := a.Read(buf); err != nil || string(buf[:n]) != "answer" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Read(buf); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the peer's FIN: %v, want io.EOF", err)
	}
	if hasWNotify(a) || hasWNotify(b) {
		t.Fatalf("write-notify channel made without a waiting writer: opener %v, acceptor %v", hasWNotify(a), hasWNotify(b))
	}
}

// A writer out of window credit makes the channel when it waits and is
// woken through it: by the peer's window update, by its write deadline
// passing, and by a reset of the stream.
func TestWaitingWriterWokenThroughLazyWriteNotify(t *testing.T) {
	client, server := muxPair(t)
	open := func() (*muxStream, *muxStream) {
		a, err := client.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Write(make([]byte, muxWindow)); err != nil { // the whole window
			t.Fatal(err)
		}
		return a, acceptWithin(t, server)
	}
	write := func(a *muxStream) <-chan error {
		errc := make(chan error, 1)
		// Owner: this test; ends when the write does (credit, deadline or
		// reset, each caused below within waitLong).
		go func() { _, err := a.Write([]byte("more")); errc <- err }()
		waitFor(t, "writer waiting on its write-notify channel", func() bool { return hasWNotify(a) })
		return errc
	}
	result := func(errc <-chan error) error {
		select {
		case err := <-errc:
			return err
		case <-time.After(waitLong):
			t.Fatal("writer not woken")
			return nil
		}
	}

	a, b := open()
	errc := write(a)
	// Reading half the window returns its credit.
	buf := make([]byte, muxWindow)
	_ = b.SetReadDeadline(time.Now().Add(waitLong))
	for got := 0; got < muxWindow/2; {
		n, err := b.Read(buf[:muxWindow/2-got])
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	if err := result(errc); err != nil {
		t.Fatalf("write after the window update: %v", err)
	}

	a, _ = open()
	errc = write(a)
	_ = a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	if err := result(errc); !errors.Is(err, errTimeout) {
		t.Fatalf("write past its deadline: %v, want %v", err, errTimeout)
	}

	a, _ = open()
	errc = write(a)
	a.Reset()
	if err := result(errc); !errors.Is(err, errStreamReset) {
		t.Fatalf("write on a reset stream: %v, want %v", err, errStreamReset)
	}
}
