package adapter

import (
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// trackedBody counts what is read of r and whether it was closed.
type trackedBody struct {
	r      io.Reader
	read   atomic.Int64
	closed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *trackedBody) Close() error {
	b.closed.Store(true)
	if c, ok := b.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// endless never ends and never fails.
type endless struct{}

func (endless) Read(p []byte) (int, error) { return len(p), nil }

// DrainBody reads a short rest to its end without closing it (the
// connection stays reusable), stops an endless one at limit, and leaves a
// stalled one once within has passed, by closing it.
func TestDrainBodyBounds(t *testing.T) {
	short := &trackedBody{r: strings.NewReader(strings.Repeat("x", 1000))}
	DrainBody(short, 4096, time.Minute)
	if short.read.Load() != 1000 || short.closed.Load() {
		t.Fatalf("short rest: read %d, closed %v; want 1000 read, not closed", short.read.Load(), short.closed.Load())
	}

	long := &trackedBody{r: endless{}}
	DrainBody(long, 4096, time.Minute)
	if long.read.Load() != 4096 {
		t.Fatalf("endless rest: read %d, want 4096", long.read.Load())
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	stalled := &trackedBody{r: pr}
	done := make(chan struct{})
	go func() { // Owner: this test; ends when DrainBody's timer closes the pipe.
		DrainBody(stalled, 4096, 20*time.Millisecond)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("DrainBody still waits on a body that sends nothing")
	}
	if !stalled.closed.Load() {
		t.Fatal("a stalled body was not closed")
	}
}
