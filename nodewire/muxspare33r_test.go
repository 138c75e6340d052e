package nodewire

import (
	"io"
	"testing"
	"time"
)

// discardSession is a server session whose peer reads and discards all it
// is sent, so that its writer can be fed batches of any size.
func discardSession(tb testing.TB) *muxSession {
	tb.Helper()
	c1, c2 := tcpPair(tb)
	s := muxServer(c2)
	tb.Cleanup(func() { _ = s.Close() })
	// Owner: the test; ends when the session closes its end.
	go func() { _, _ = io.Copy(io.Discard, c1) }()
	return s
}

// writeBatch queues frames data frames of size bytes each as one batch
// (wmu held while they are queued: the writer takes them all at once) and
// waits until the writer has written them.
func writeBatch(tb testing.TB, s *muxSession, frames int, payload []byte) {
	tb.Helper()
	s.wmu.Lock()
	for range frames {
		s.appendLocked(muxTypeData, 0, 1, uint32(len(payload)), payload)
	}
	s.wmu.Unlock()
	notify(s.wake)
	if err := s.waitWritten(s.queuedMark(), time.Now().Add(waitLong)); err != nil {
		tb.Fatalf("the batch was not written: %v", err)
	}
}

// BenchmarkBurstBetweenSmallBatches is a session whose batches alternate
// between a burst (96 KiB) and a few small ones: the burst-sized buffers
// must be kept through the lulls, not grown again for every burst.
func BenchmarkBurstBetweenSmallBatches(b *testing.B) {
	s := discardSession(b)
	payload := make([]byte, muxMaxData)
	b.ReportAllocs()
	for b.Loop() {
		writeBatch(b, s, 3, payload)
		writeBatch(b, s, 1, payload[:16])
		writeBatch(b, s, 1, payload[:16])
	}
}

// A session whose bursts come between a few small batches keeps its
// burst-sized buffers through the lulls: the merged cut let one go at the
// first small batch, and every later burst grew a new one (230 KB
// allocated per burst of 96 KiB in BenchmarkBurstBetweenSmallBatches).
func TestBurstBuffersKeptBetweenSmallBatches(t *testing.T) {
	s := discardSession(t)
	payload := make([]byte, muxMaxData)
	// Warm up: both buffers burst-sized.
	for range 2 {
		writeBatch(t, s, 3, payload)
	}
	p0, s0 := bufferCaps(s)
	if min(p0, s0) <= muxSpareKeep {
		t.Fatalf("after two bursts the buffers' capacities are %d and %d: the test made no burst-sized buffers", p0, s0)
	}
	for range 10 {
		writeBatch(t, s, 3, payload)
		burst := time.Now()
		writeBatch(t, s, 1, payload[:16])
		writeBatch(t, s, 1, payload[:16])
		// The rule keeps a burst's buffer for muxSpareLinger: a machine
		// that stalled that long between a burst and its small batches
		// (a loaded CI runner) could not tell the rule from its mutant.
		if d := time.Since(burst); d >= muxSpareLinger/2 {
			t.Skipf("two small batches took %v after a burst, too near muxSpareLinger (%v) to judge", d, muxSpareLinger)
		}
	}
	// The buffers take turns: compare the pair, not their order.
	if p, sp := bufferCaps(s); min(p, sp) != min(p0, s0) || max(p, sp) != max(p0, s0) {
		t.Fatalf("the buffers' capacities went from %d and %d to %d and %d: a buffer was let go between bursts and grown again", p0, s0, p, sp)
	}
}

// A batch that fills exactly a quarter of a large buffer counts as a
// burst: the small batch right after it keeps the buffer.
func TestKeepSpareLockedRemembersBurst(t *testing.T) {
	var s muxSession
	const c = 4 * muxSpareKeep
	if !s.keepSpareLocked(c/4, c) {
		t.Fatal("a batch filling a quarter of the buffer let it go")
	}
	if !s.keepSpareLocked(1, c) {
		t.Fatal("a small batch right after a burst let the burst's buffer go")
	}
	s.burstAt = s.burstAt.Add(-muxSpareLinger)
	if s.keepSpareLocked(1, c) {
		t.Fatal("a small batch muxSpareLinger after the last burst kept its buffer")
	}
}

// Only a buffer over muxSpareKeep makes a burst: a batch filling a quarter
// of one kept anyway (the usual batch) must not keep a large buffer
// through a later lull.
func TestKeepSpareSmallBufferIsNoBurst(t *testing.T) {
	var s muxSession
	if !s.keepSpareLocked(muxSpareKeep/4, muxSpareKeep) {
		t.Fatal("a buffer of muxSpareKeep was let go")
	}
	if s.keepSpareLocked(1, 4*muxSpareKeep) {
		t.Fatal("a batch in a buffer of muxSpareKeep counted as a burst: a large buffer was kept through the lull")
	}
}
