package nodewire

import (
	"io"
	"runtime"
	"testing"
	"time"
)

// TestTakePendingKeepsBothBuffers: a wake-up with nothing pending (the
// frames it signalled went out in the batch before) swaps nothing, so the
// writer's two buffers keep taking turns.
func TestTakePendingKeepsBothBuffers(t *testing.T) {
	s := &muxSession{pending: make([]byte, 0, 4096), spare: make([]byte, 0, 8192)}
	drained := make(chan struct{})
	s.drained = drained
	if buf := s.takePendingLocked(); buf != nil {
		t.Fatalf("empty take returned %d bytes", len(buf))
	}
	select {
	case <-drained:
	default:
		t.Fatal("a take with nothing pending left a waiter for room blocked")
	}
	if cap(s.pending) != 4096 || cap(s.spare) != 8192 {
		t.Fatalf("empty take moved the buffers: pending cap %d, spare cap %d", cap(s.pending), cap(s.spare))
	}
	s.appendLocked(muxTypeData, 0, 1, 3, []byte("abc"))
	buf := s.takePendingLocked()
	if len(buf) != muxHeaderLen+3 || cap(buf) != 4096 {
		t.Fatalf("take returned len %d cap %d, want %d bytes of the 4096 buffer", len(buf), cap(buf), muxHeaderLen+3)
	}
	if len(s.pending) != 0 || cap(s.pending) != 8192 || s.spare != nil {
		t.Fatalf("appenders did not get the spare: pending len %d cap %d, spare %v", len(s.pending), cap(s.pending), s.spare != nil)
	}
}

// TestAllocWriterReusesBuffers drives a session the way the
// node's relays do (several streams queue a frame each at about the same
// time, so the writer is often woken for frames an earlier batch already
// sent) and checks that, once warm, sending and receiving allocate
// nothing: dropping a buffer on such a wake-up had the next batch grow one
// from nothing, and handing a receive buffer back allocated its slice
// header. Under -race sync.Pool drops a quarter of what is put back, so
// `make test` runs this without it.
func TestAllocWriterReusesBuffers(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race; make test runs this test without it")
	}
	const streams = 8
	client, server := muxPair(t)
	chunk := make([]byte, 300)
	var (
		start = make([]chan struct{}, streams)
		done  = make(chan error, streams)
		local = make([]*muxStream, streams)
	)
	for i := range streams {
		st, err := client.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write(chunk); err != nil {
			t.Fatal(err)
		}
		local[i] = st
		peer := acceptWithin(t, server)
		go func() { // Owner: the test; ends when the stream reaches EOF or fails.
			_, _ = io.Copy(io.Discard, peer)
		}()
		start[i] = make(chan struct{})
		go func() { // Owner: the test; ends when start[i] is closed.
			for range start[i] {
				_, err := local[i].Write(chunk)
				done <- err
			}
		}()
	}
	defer func() {
		for i := range streams {
			close(start[i])
			_ = local[i].Close()
		}
	}()
	round := func() {
		for i := range streams {
			start[i] <- struct{}{}
		}
		for range streams {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		// Spin rather than waitWritten, whose timer would be counted.
		for deadline := time.Now().Add(waitLong); client.written.Load() != client.queuedMark(); runtime.Gosched() {
			if time.Now().After(deadline) {
				t.Fatal("frames not written")
			}
		}
	}
	for range 300 { // warm: both buffers grown to a batch, pools filled
		round()
	}
	if best := fewestMallocs(round); best > allocRounds/10 {
		t.Errorf("%d allocations in the best of %d stretches of %d rounds of %d frames, want ~0", best, allocStretches, allocRounds, streams)
	}
}

// allocRounds and allocStretches: fewestMallocs counts allocations over
// allocStretches runs of allocRounds rounds each.
const allocRounds, allocStretches = 1000, 4

// fewestMallocs returns the fewest heap allocations (process-wide) that
// allocRounds calls of round made, over allocStretches tries.
// testing.AllocsPerRun rounds down to whole allocations per run, so a
// stretch is counted together; the best stretch is judged because a
// collection empties the pools now and then, and a batch larger than any
// before still grows a buffer.
func fewestMallocs(round func()) uint64 {
	best := ^uint64(0)
	for range allocStretches {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range allocRounds {
			round()
		}
		runtime.ReadMemStats(&after)
		best = min(best, after.Mallocs-before.Mallocs)
	}
	return best
}
