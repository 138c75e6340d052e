package nodewire

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// writeSlowly writes the frame of env as the first data of stream id, in
// pieces of piece bytes with gap between them: a request crossing a thin
// or long link, one window per round trip.
func writeSlowly(t *testing.T, c net.Conn, id uint32, env *iop.Envelope, piece int, gap time.Duration, stop <-chan struct{}) {
	t.Helper()
	frame, err := AppendFrame(nil, env, 0)
	if err != nil {
		t.Fatal(err)
	}
	flags := uint16(flagSYN)
	for off := 0; off < len(frame); off += piece {
		end := min(off+piece, len(frame))
		if _, err := c.Write(append(rawHeader(muxTypeData, flags, id, uint32(end-off)), frame[off:end]...)); err != nil {
			t.Errorf("edge write: %v", err)
			return
		}
		flags = 0
		select {
		case <-time.After(gap):
		case <-stop:
			return
		}
	}
}

// A run's request takes as long as its bytes take to cross the link: a
// first frame still arriving after the handshake timeout is read on, not
// refused (which the Edge, failing over, would meet on every node).
func TestFirstFrameSlowerThanHandshakeTimeoutIsRead(t *testing.T) {
	e := startRawEdge(t)
	const idle = 1500 * time.Millisecond
	cc, c := rawEdgeReady(t, e, DialConfig{HandshakeTimeout: idle}, &iop.HeartbeatConfig{IntervalMs: 1000, TimeoutMs: 60_000})
	resets := edgeResets(c)
	got := make(chan *iop.Envelope, 1)
	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		got <- first
		st.Abort()
	})
	req := runRequest("slow")
	req.GetRunRequest().Target = strings.Repeat("t", 200<<10) // within one window
	start := time.Now()
	// 25 pieces 100 ms apart: about 2.5 s in all, never idle for long.
	writeSlowly(t, c, 2, req, 8<<10, 100*time.Millisecond, t.Context().Done())
	select {
	case first := <-got:
		if elapsed := time.Since(start); elapsed <= idle {
			t.Fatalf("the frame took %v, not longer than the handshake timeout %v: the test proves nothing", elapsed, idle)
		}
		if n := len(first.GetRunRequest().GetTarget()); n != 200<<10 {
			t.Fatalf("handler got a target of %d bytes, want %d", n, 200<<10)
		}
	case id, ok := <-resets:
		if !ok {
			t.Fatal("node closed the session while a first frame was arriving")
		}
		t.Fatalf("node reset stream %d while its first frame was still arriving", id)
	case <-time.After(waitLong + idle):
		t.Fatal("the handler never got the first frame")
	}
}

// A first frame that stops arriving is refused after one handshake
// timeout without a byte, and one that trickles on for ever after
// firstFrameMaxWait: neither holds a handler on the Edge's cooperation.
func TestFirstFrameThatStallsOrTricklesIsRefused(t *testing.T) {
	old := firstFrameMaxWait
	firstFrameMaxWait = 2 * time.Second
	t.Cleanup(func() { firstFrameMaxWait = old })
	e := startRawEdge(t)
	const idle = 500 * time.Millisecond
	cc, c := rawEdgeReady(t, e, DialConfig{HandshakeTimeout: idle}, &iop.HeartbeatConfig{IntervalMs: 1000, TimeoutMs: 60_000})
	resets := edgeResets(c)
	served := make(chan uint32, 2)
	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		served <- st.ID()
		st.Abort()
	})

	// Stalled: half of a frame, then nothing.
	stalled := runRequest("stalled")
	stalled.GetRunRequest().Target = strings.Repeat("s", 32<<10) // half fits one data frame
	frame, err := AppendFrame(nil, stalled, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := frame[:len(frame)/2]
	start := time.Now()
	if _, err := c.Write(append(rawHeader(muxTypeData, flagSYN, 2, uint32(len(half))), half...)); err != nil {
		t.Fatal(err)
	}
	expectReset(t, resets, served, 2)
	if elapsed := time.Since(start); elapsed < idle {
		t.Fatalf("stalled first frame refused after %v, before the handshake timeout %v", elapsed, idle)
	}

	// Trickling: a byte every 100 ms, so never idle, and never whole.
	trickle := runRequest("trickle")
	trickle.GetRunRequest().Target = strings.Repeat("r", 64<<10)
	stop := make(chan struct{})
	done := make(chan struct{})
	start = time.Now()
	// Owner: this test; stops at stop (closed below) or when the frame is
	// all written (it is not, in the time the test waits).
	go func() {
		defer close(done)
		writeSlowly(t, c, 4, trickle, 1, 100*time.Millisecond, stop)
	}()
	expectReset(t, resets, served, 4)
	t.Logf("trickle reset after %v", time.Since(start))
	close(stop)
	await(t, done, "the trickler to stop")
	if elapsed := time.Since(start); elapsed < firstFrameMaxWait {
		t.Fatalf("trickling first frame refused after %v, before firstFrameMaxWait %v", elapsed, firstFrameMaxWait)
	}
}

// expectReset waits for the node to reset stream id without serving it.
func expectReset(t *testing.T, resets <-chan uint32, served <-chan uint32, id uint32) {
	t.Helper()
	select {
	case got, ok := <-resets:
		if !ok {
			t.Fatalf("node closed the session instead of resetting stream %d", id)
		}
		if got != id {
			t.Fatalf("node reset stream %d, want %d", got, id)
		}
	case got := <-served:
		t.Fatalf("node served stream %d from a first frame that never arrived whole", got)
	case <-time.After(firstFrameMaxWait + waitLong):
		t.Fatalf("node never refused stream %d", id)
	}
}
