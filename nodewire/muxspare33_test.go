package nodewire

import (
	"testing"
	"time"
)

// bufferCaps returns the capacities of the session's two write buffers.
func bufferCaps(s *muxSession) (pending, spare int) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return cap(s.pending), cap(s.spare)
}

// writeAndWait writes p on st and waits until the session's writer has
// written it to the connection.
func writeAndWait(t *testing.T, st *muxStream, p []byte) {
	t.Helper()
	if _, err := st.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := st.sess.waitWritten(st.sess.queuedMark(), time.Now().Add(waitLong)); err != nil {
		t.Fatalf("the batch was not written: %v", err)
	}
}

// A burst grows the session's write buffers (every stream opened at once
// queues its request in one batch); once batches are small again the
// session lets the burst-sized buffers go instead of keeping them, as it
// did, for the rest of its life: a session whose streams are held idle
// keeps no burst-sized buffer.
func TestBurstBuffersLetGoWhenBatchesShrink(t *testing.T) {
	a, b := announcedPair(t)
	s := a.sess
	// A burst of 192 KiB in one batch: queued while the writer is kept
	// out (wmu held), within the stream's window, as its data frames.
	payload := make([]byte, muxMaxData)
	s.wmu.Lock()
	for range 6 {
		s.appendLocked(muxTypeData, 0, a.StreamID(), uint32(len(payload)), payload)
	}
	s.wmu.Unlock()
	notify(s.wake)
	if err := s.waitWritten(s.queuedMark(), time.Now().Add(waitLong)); err != nil {
		t.Fatalf("the burst was not written: %v", err)
	}
	if p, sp := bufferCaps(s); max(p, sp) < 6*muxMaxData {
		t.Fatalf("after the burst the buffers' capacities are %d and %d: the test made no burst-sized buffer", p, sp)
	}
	waitFor(t, "the peer received the burst", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.rbuf)-b.roff >= 6*muxMaxData
	})

	// Small batches from then on, once the burst is muxSpareLinger old
	// (aged here rather than waited for): within two batches (the buffers
	// take turns), neither buffer is burst-sized any more.
	s.wmu.Lock()
	s.burstAt = s.burstAt.Add(-muxSpareLinger)
	s.wmu.Unlock()
	for range 4 {
		writeAndWait(t, a, []byte("z"))
	}
	if p, sp := bufferCaps(s); p > muxSpareKeep || sp > muxSpareKeep {
		t.Fatalf("after small batches the write buffers' capacities are %d and %d, want at most %d", p, sp, muxSpareKeep)
	}
}

// The writer keeps a large buffer while batches still fill a quarter of
// it (steady heavy traffic reuses it, allocating nothing per batch), and
// for muxSpareLinger after the last that did; it always keeps one up to
// muxSpareKeep, and never one over 2*muxMaxPending.
func TestKeepSpare(t *testing.T) {
	const never = time.Duration(1<<63 - 1)
	for _, c := range []struct {
		n, c int
		lull time.Duration
		want bool
	}{
		{0, muxSpareKeep, never, true},
		{1, muxSpareKeep, never, true},
		{1, muxSpareKeep + 1, never, false},
		{1, muxSpareKeep + 1, muxSpareLinger - 1, true},
		{1, muxSpareKeep + 1, muxSpareLinger, false},
		{(muxSpareKeep + 4) / 4, muxSpareKeep + 4, never, true},
		{(muxSpareKeep+4)/4 - 1, muxSpareKeep + 4, never, false},
		{muxMaxPending, 2 * muxMaxPending, never, true},
		{2*muxMaxPending + 1, 2*muxMaxPending + 1, 0, false},
	} {
		if got := keepSpare(c.n, c.c, c.lull); got != c.want {
			t.Errorf("keepSpare(%d, %d, %v) = %v, want %v", c.n, c.c, c.lull, got, c.want)
		}
	}
}
