package gateway

import "testing"

// readyAlways is a stream whose next frame has always already arrived: a
// backlog that never drains.
type readyAlways bool

func (r readyAlways) Ready() bool { return bool(r) }

// With the next frame always waiting, writes are held, but never more than
// maxFlushBatch of them; a write marked now ([DONE]) is flushed at once;
// nothing is held when the next frame has not arrived.
func TestFlushBatchBounds(t *testing.T) {
	var b flushBatch
	for i := 1; i <= 3*maxFlushBatch; i++ {
		flush := b.afterWrite(readyAlways(true), false)
		if want := i%maxFlushBatch == 0; flush != want {
			t.Fatalf("write %d under a standing backlog: flush %v, want %v", i, flush, want)
		}
	}
	b = flushBatch{}
	if b.afterWrite(readyAlways(true), false) || !b.afterWrite(readyAlways(true), true) {
		t.Fatal("a write marked now was held behind a waiting frame")
	}
	if b.held != 0 {
		t.Fatalf("held %d after a flush, want 0", b.held)
	}
	if !b.afterWrite(readyAlways(false), false) {
		t.Fatal("a write was held with no next frame waiting")
	}
	if b.afterWrite(readyAlways(true), false); !b.beforeWait(readyAlways(false)) || b.held != 0 {
		t.Fatal("a held write was not flushed before waiting for the next frame")
	}
	if b.beforeWait(readyAlways(false)) {
		t.Fatal("flush before waiting with nothing held")
	}
}
