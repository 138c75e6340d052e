package gateway

// maxFlushBatch bounds how many writes a relay leaves unflushed because the
// next frame or event had already arrived: a backlog leaves in one write
// instead of one per chunk, but a stream that never stops delivering still
// reaches its client every maxFlushBatch writes (net/http's own buffers,
// 2 KiB and 4 KiB, write out sooner when they fill).
const maxFlushBatch = 16

// readier is the stream a relay reads: Ready reports whether the next
// frame or event has already arrived (dispatch Stream.Ready).
type readier interface{ Ready() bool }

// flushBatch decides when a streaming relay flushes what it wrote to its
// client. Streams were flushed chunk by chunk; when the relay falls
// behind (a burst from the provider, or a CPU shared by many streams) the
// chunks that have already arrived are instead written together and
// flushed once, as a proxy reading its upstream in one read would. No
// chunk ever waits for one that has not arrived: afterWrite flushes unless
// the next frame is already here, and beforeWait flushes what is held
// before the relay waits for the node.
type flushBatch struct {
	held int // writes since the last flush; 0: nothing held
}

// afterWrite records a write and reports whether to flush now: yes when
// now is set, when the next frame has not arrived, or when maxFlushBatch
// writes are held.
func (b *flushBatch) afterWrite(next readier, now bool) bool {
	b.held++
	if !now && b.held < maxFlushBatch && next.Ready() {
		return false
	}
	b.held = 0
	return true
}

// beforeWait reports whether held writes must be flushed before the relay
// waits for its next frame: yes when there are some and that frame has not
// arrived.
func (b *flushBatch) beforeWait(next readier) bool {
	if b.held == 0 || next.Ready() {
		return false
	}
	b.held = 0
	return true
}

// take reports whether writes are held, and forgets them: the relay is
// ending and flushes them itself.
func (b *flushBatch) take() bool {
	held := b.held > 0
	b.held = 0
	return held
}
