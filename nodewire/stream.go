package nodewire

import (
	"bufio"
	"errors"
	"fmt"
	"sync"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// abortLinger is how long an aborted stream waits for the peer's FIN
// before it is reset.
const abortLinger = 3 * time.Second

// Stream is one multiplexed exchange (a run, a tunnel, a command, a refresh,
// or the control stream). Send is safe for concurrent use; Recv must be
// called from one goroutine at a time.
type Stream struct {
	s        *muxStream
	br       *bufio.Reader
	maxFrame int

	wmu    sync.Mutex // serialises Send so frames never interleave
	queued []byte     // guarded by wmu: frames encoded by Queue, not yet written
	rmu    sync.Mutex // serialises Recv (guards br)

	closeOnce sync.Once
}

func newStream(s *muxStream, maxFrame int) *Stream {
	// Mux streams read from an in-memory buffer, so a large bufio buffer
	// per stream would only cost memory; a small one saves the lock round
	// trips of reading a frame header and payload separately.
	return &Stream{s: s, br: bufio.NewReaderSize(s, 512), maxFrame: maxFrame}
}

// ID is the stream's multiplexer id, for logs; 0 until its first frame is
// sent on a stream this side opened.
func (st *Stream) ID() uint32 { return st.s.StreamID() }

// Send writes one envelope as a frame, together with any frames queued
// before it, in one write.
func (st *Stream) Send(env *iop.Envelope) error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	if len(st.queued) == 0 {
		return WriteFrame(st.s, env, st.maxFrame)
	}
	buf, err := AppendFrame(st.queued, env, st.maxFrame)
	if err != nil {
		return err
	}
	st.queued = buf
	return st.flushLocked()
}

// SendWritten is Send that returns only once the frame has been written to
// the connection (not merely queued for the writer), or fails by
// deadline: for answers whose delivery the caller acts on (the ready
// acknowledgement is sent before the node is activated).
func (st *Stream) SendWritten(env *iop.Envelope, deadline time.Time) error {
	_ = st.SetWriteDeadline(deadline)
	if err := st.Send(env); err != nil {
		return err
	}
	sess := st.s.sess
	return sess.waitWritten(sess.queuedMark(), deadline)
}

// queueFlushAt is how much Queue buffers before it writes anyway.
const queueFlushAt = 64 << 10

// Queue encodes env for a later Send or Flush instead of writing it now:
// frames nobody is waiting for one by one (a non-streamed response, usage)
// then share a single write. It writes at once when queueFlushAt bytes are
// pending.
func (st *Stream) Queue(env *iop.Envelope) error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	buf, err := AppendFrame(st.queued, env, st.maxFrame)
	if err != nil {
		return err
	}
	st.queued = buf
	if len(st.queued) >= queueFlushAt {
		return st.flushLocked()
	}
	return nil
}

// Flush writes every queued frame.
func (st *Stream) Flush() error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	return st.flushLocked()
}

func (st *Stream) flushLocked() error {
	if len(st.queued) == 0 {
		return nil
	}
	_, err := st.s.Write(st.queued)
	st.queued = st.queued[:0]
	if cap(st.queued) > 4*queueFlushAt {
		st.queued = nil
	}
	if err != nil {
		return fmt.Errorf("nodewire: write: %w", err)
	}
	return nil
}

// Recv reads the next envelope. io.EOF means the peer closed its side
// cleanly between frames.
func (st *Stream) Recv() (*iop.Envelope, error) {
	st.rmu.Lock()
	defer st.rmu.Unlock()
	return ReadFrame(st.br, st.maxFrame)
}

// SetReadDeadline bounds the next Recv calls; zero clears it.
func (st *Stream) SetReadDeadline(t time.Time) error { return st.s.SetReadDeadline(t) }

// SetWriteDeadline bounds the next Send calls; zero clears it.
func (st *Stream) SetWriteDeadline(t time.Time) error { return st.s.SetWriteDeadline(t) }

// CloseWrite half-closes the stream: the peer reads io.EOF after the frames
// already sent, and this side may still Recv. Safe to call more than once.
func (st *Stream) CloseWrite() error {
	_ = st.Flush()
	var err error
	st.closeOnce.Do(func() { err = st.s.Close() })
	if err != nil && !errors.Is(err, errStreamClosed) {
		return fmt.Errorf("nodewire: close stream: %w", err)
	}
	return nil
}

// Abort gives up on the stream and returns at once, whatever the peer
// does: frames queued here go out only as far as they can without waiting,
// the stream is half-closed, unread data is dropped, and whatever the peer
// still sends is discarded (its window credited back, so the peer's writes
// never block) until the peer's FIN; a peer that never sends one gets the
// stream reset after abortLinger. No goroutine is started. Safe to call
// more than once, and after the exchange has finished.
func (st *Stream) Abort() {
	// A Send blocked on window credit would hold wmu: wake it, and make
	// the flush below give up rather than wait.
	_ = st.s.SetWriteDeadline(time.Now())
	_ = st.CloseWrite()
	st.s.abort(abortLinger)
}

// SetDeadline bounds both Send and Recv; zero clears it.
func (st *Stream) SetDeadline(t time.Time) error { return st.s.SetDeadline(t) }
