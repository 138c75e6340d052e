package nodewire

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

// readResult is how a blocked read ended, and when.
type readResult struct {
	err error
	at  time.Time
}

// blockedRead starts a one-byte Read on st and returns where its result
// arrives.
func blockedRead(st *muxStream) <-chan readResult {
	out := make(chan readResult, 1)
	go func() { // Owner: the test; ends with the read (data, deadline or the pair's close).
		_, err := st.Read(make([]byte, 1))
		out <- readResult{err, time.Now()}
	}()
	return out
}

// awaitRead returns the read's result, failing the test if it does not
// come within waitLong.
func awaitRead(t *testing.T, c <-chan readResult, what string) readResult {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(waitLong):
		t.Fatalf("%s: the read never returned", what)
		return readResult{}
	}
}

// announcedPair is a stream opened on a session pair and announced (a)
// with its accepted end (b).
func announcedPair(t *testing.T) (a, b *muxStream) {
	t.Helper()
	client, server := muxPair(t)
	a, _ = server.OpenStream()
	if _, err := a.Write(nil); err != nil { // announce
		t.Fatal(err)
	}
	return a, acceptWithin(t, client)
}

// A deadline moved while a read waits applies to that read: moved
// earlier it ends the read then, moved later it keeps the read waiting
// past the first one, cleared it lets the read wait for data; a deadline
// without a monotonic reading works the same.
func TestStreamDeadlineMovesUnderABlockedRead(t *testing.T) {
	a, b := announcedPair(t)

	_ = b.SetReadDeadline(time.Now().Add(time.Hour))
	res := blockedRead(b)
	time.Sleep(20 * time.Millisecond)
	_ = b.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if r := awaitRead(t, res, "deadline moved earlier"); !errors.Is(r.err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", r.err)
	}

	start := time.Now()
	_ = b.SetReadDeadline(start.Add(30 * time.Millisecond))
	res = blockedRead(b)
	_ = b.SetReadDeadline(start.Add(150 * time.Millisecond))
	r := awaitRead(t, res, "deadline moved later")
	if !errors.Is(r.err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", r.err)
	}
	if r.at.Before(start.Add(150 * time.Millisecond)) {
		t.Fatalf("read ended %v after start, before the later deadline", r.at.Sub(start))
	}

	start = time.Now()
	_ = b.SetReadDeadline(start.Add(100 * time.Millisecond).Round(0)) // wall clock only
	r = awaitRead(t, blockedRead(b), "wall-clock deadline")
	if !errors.Is(r.err, os.ErrDeadlineExceeded) || r.at.Sub(start) < 90*time.Millisecond {
		t.Fatalf("wall-clock deadline: %v after %v", r.err, r.at.Sub(start))
	}

	_ = b.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	res = blockedRead(b)
	_ = b.SetReadDeadline(time.Time{})
	select {
	case r := <-res:
		t.Fatalf("read ended (%v) after its deadline was cleared", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := a.Write([]byte("z")); err != nil {
		t.Fatal(err)
	}
	if r := awaitRead(t, res, "cleared deadline"); r.err != nil {
		t.Fatalf("read after clearing the deadline: %v", r.err)
	}
}

// A deadline already passed fails reads at once, data first: bytes that
// arrived are still read. Setting a new deadline ahead lifts the expiry.
func TestStreamDeadlinePassed(t *testing.T) {
	a, b := announcedPair(t)
	_ = b.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	if _, err := a.Write([]byte("zz")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bytes arrive", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.rbuf)-b.roff == 2
	})
	buf := make([]byte, 1)
	if n, err := b.Read(buf); n != 1 || err != nil {
		t.Fatalf("read of arrived bytes past the deadline: %d %v", n, err)
	}
	_ = b.SetReadDeadline(time.Now().Add(time.Hour))
	if n, err := b.Read(buf); n != 1 || err != nil {
		t.Fatalf("read under a new deadline: %d %v", n, err)
	}
	res := blockedRead(b)
	_ = b.SetReadDeadline(time.Now())
	if r := awaitRead(t, res, "deadline set to now"); !errors.Is(r.err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", r.err)
	}
}

// Every reader waiting on one stream sees its deadline expire, though the
// expiry signals the stream once.
func TestStreamDeadlineWakesEveryReader(t *testing.T) {
	_, b := announcedPair(t)
	_ = b.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	var reads []<-chan readResult
	for range 4 {
		reads = append(reads, blockedRead(b))
	}
	for i, res := range reads {
		if r := awaitRead(t, res, fmt.Sprintf("reader %d of 4", i+1)); !errors.Is(r.err, os.ErrDeadlineExceeded) {
			t.Errorf("reader %d: %v, want a deadline error", i+1, r.err)
		}
	}
}

// A write blocked on an empty window ends at its deadline, and one set
// while it waits applies to it.
func TestStreamWriteDeadline(t *testing.T) {
	a, _ := announcedPair(t)
	_ = a.SetWriteDeadline(time.Now().Add(time.Hour))
	errc := make(chan error, 1)
	go func() { // Owner: the test; ends at the deadline set below.
		_, err := a.Write(make([]byte, 2*muxWindow))
		errc <- err
	}()
	waitFor(t, "the writer uses up its window", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.sendWin == 0
	})
	_ = a.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write: %v, want a deadline error", err)
		}
	case <-time.After(waitLong):
		t.Fatal("the write deadline was ignored")
	}
}

// A stream that can no longer wait keeps no deadline timer running, and
// sets none: a finished stream must not stay referenced by a timer
// minutes away (an edge finishes thousands a second).
func TestStreamDeadlineTimersStopWhenFinished(t *testing.T) {
	armed := func(d *streamDeadline, st *muxStream) bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		if d.timer == nil || !d.timer.Stop() {
			return false
		}
		d.timer.Reset(time.Until(d.at)) // put it back as found
		return true
	}

	// Both ways closed.
	a, b := announcedPair(t)
	_ = b.SetDeadline(time.Now().Add(time.Hour))
	if !armed(&b.rdl, b) || !armed(&b.wdl, b) {
		t.Fatal("deadlines ahead armed no timer")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the FIN arrives", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.rclosed
	})
	if armed(&b.rdl, b) {
		t.Fatal("the read deadline's timer runs past the peer's FIN")
	}
	if !armed(&b.wdl, b) {
		t.Fatal("the write deadline's timer stopped while the stream can still write")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if armed(&b.wdl, b) {
		t.Fatal("the write deadline's timer runs past Close")
	}
	_ = b.SetDeadline(time.Now().Add(time.Hour))
	if armed(&b.rdl, b) || armed(&b.wdl, b) {
		t.Fatal("a finished stream armed a deadline timer")
	}

	// Reset.
	_, d := announcedPair(t)
	_ = d.SetDeadline(time.Now().Add(time.Hour))
	d.Reset()
	if armed(&d.rdl, d) || armed(&d.wdl, d) {
		t.Fatal("a reset stream kept a deadline timer")
	}
}

// The timer's callback does nothing for a deadline cleared or already
// expired, and re-arms itself when it runs before the deadline (moved
// later while it ran).
func TestStreamDeadlineEarlyFire(t *testing.T) {
	_, b := announcedPair(t)
	_ = b.SetReadDeadline(time.Now().Add(time.Hour))
	b.mu.Lock()
	b.rdl.timer.Stop() // as if it had fired
	if b.rdl.fireLocked() || b.rdl.expired {
		b.mu.Unlock()
		t.Fatal("a callback an hour early expired the deadline")
	}
	if !b.rdl.timer.Stop() {
		b.mu.Unlock()
		t.Fatal("a callback an hour early did not re-arm the timer")
	}
	b.rdl.at = time.Now().Add(-time.Millisecond)
	if !b.rdl.fireLocked() || !b.rdl.expired {
		b.mu.Unlock()
		t.Fatal("a callback past the deadline did not expire it")
	}
	if b.rdl.fireLocked() {
		b.mu.Unlock()
		t.Fatal("an expired deadline expired again")
	}
	b.rdl.at, b.rdl.expired = time.Time{}, false
	if b.rdl.fireLocked() {
		b.mu.Unlock()
		t.Fatal("a cleared deadline expired")
	}
	b.mu.Unlock()
}
