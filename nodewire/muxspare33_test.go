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

	// Small batches from then on: within two batches (the buffers take
	// turns), neither buffer is burst-sized any more.
	for range 4 {
		writeAndWait(t, a, []byte("z"))
	}
	if p, sp := bufferCaps(s); p > muxSpareKeep || sp > muxSpareKeep {
		t.Fatalf("after small batches the write buffers' capacities are %d and %d, want at most %d", p, sp, muxSpareKeep)
	}
}

// The writer keeps a large buffer while batches still fill a quarter of
// it (steady heavy traffic reuses it, allocating nothing per batch), and
// always keeps one up to muxSpareKeep; never one over 2*muxMaxPending.
func TestKeepSpare(t *testing.T) {
	for _, c := range []struct {
		n, c int
		want bool
	}{
		{0, muxSpareKeep, true},
		{1, muxSpareKeep, true},
		{1, muxSpareKeep + 1, false},
		{(muxSpareKeep + 4) / 4, muxSpareKeep + 4, true},
		{(muxSpareKeep+4)/4 - 1, muxSpareKeep + 4, false},
		{muxMaxPending, 2 * muxMaxPending, true},
		{2*muxMaxPending + 1, 2*muxMaxPending + 1, false},
	} {
		if got := keepSpare(c.n, c.c); got != c.want {
			t.Errorf("keepSpare(%d, %d) = %v, want %v", c.n, c.c, got, c.want)
		}
	}
}
