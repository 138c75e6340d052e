package nodewire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

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
	maxFrame int
	fanout   int // see Conn.fanout

	wmu    sync.Mutex // serialises Send so frames never interleave
	queued []byte     // guarded by wmu: frames encoded by Queue, not yet written; nil when none
	qbuf   *[]byte    // guarded by wmu: the pooled buffer queued lives in
	// werr is guarded by wmu: set when a write failed after part of a
	// frame went out (a deadline passed waiting for window credit), so
	// every later send fails with it rather than send a frame the peer
	// would read as the rest of that one; nil otherwise.
	werr error
	rmu  sync.Mutex // serialises Recv (guards part, rerr, lentBuf, lentEnv, lentRun)
	// part is guarded by rmu: the frame Recv has begun to read; empty
	// between frames.
	part partialFrame
	// rerr is guarded by rmu: set when the stream's frames can no longer
	// be told apart (a length over the limit), so every later Recv fails
	// with it instead of reading payload bytes as a length; nil otherwise.
	rerr error
	// lentBuf, lentEnv and lentRun are guarded by rmu: what the last
	// RecvLent lent (a receive buffer and the tunnel frame decoded from
	// it, or a run event), handed back to their pools by the next
	// RecvLent before it waits; nil when nothing is lent.
	lentBuf []byte
	lentEnv *tunnelEnvelope
	lentRun *runEnvelope

	closeOnce sync.Once
}

func newStream(s *muxStream, maxFrame int) *Stream {
	return &Stream{s: s, maxFrame: maxFrame}
}

// partialFrame is a frame Recv has begun to read before all of it arrived
// (one larger than a mux data frame, or a burst cut mid-frame). It is kept
// across calls, so a read deadline that passes mid-frame leaves the stream
// in step: dispatch's Cancel sets the deadline to now under a waiting
// Recv, and Drain then reads on for the node's terminal frame.
type partialFrame struct {
	hdr  [frameHeaderLen]byte
	hdrN int // bytes of hdr read so far; 0 between frames
	need int // the payload's length, once hdr is whole
	// payload is what of the payload has arrived: allocated up to
	// eagerPayload when the length is known, then grown (doubling, up to
	// need) only as bytes arrive, so a peer that announces a large frame
	// and sends little costs little.
	payload []byte
}

func (p *partialFrame) active() bool { return p.hdrN > 0 }

// ID is the stream's multiplexer id, for logs; 0 until its first frame is
// sent on a stream this side opened.
func (st *Stream) ID() uint32 { return st.s.StreamID() }

// Send writes one envelope as a frame, together with any frames queued
// before it, in one write.
func (st *Stream) Send(env *iop.Envelope) error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	return st.sendLocked(env)
}

// SendBy is Send bounded by deadline, which it makes the stream's write
// deadline under the same lock as the send: senders sharing a stream (the
// control stream's heartbeats, answers and load reports) each get their
// own, not whichever another sender set last.
func (st *Stream) SendBy(env *iop.Envelope, deadline time.Time) error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	_ = st.s.SetWriteDeadline(deadline)
	return st.sendLocked(env)
}

func (st *Stream) sendLocked(env *iop.Envelope) error {
	if st.werr != nil {
		return st.werr
	}
	if len(st.queued) == 0 {
		return WriteFrame((*frameWriter)(st), env, st.maxFrame)
	}
	buf, err := AppendFrame(st.queued, env, st.maxFrame)
	if err != nil {
		return err
	}
	st.queued = buf
	return st.flushLocked()
}

// frameWriter writes a Stream's encoded frames (st.wmu held), recording a
// write that fails part-way (werr).
type frameWriter Stream

func (w *frameWriter) Write(p []byte) (int, error) {
	st := (*Stream)(w)
	n, err := st.s.Write(p)
	if err != nil && n > 0 {
		st.werr = fmt.Errorf("%w: %w", ErrStreamCut, err)
		return n, st.werr
	}
	return n, err
}

// SendWritten is SendBy that returns only once the frame has been written
// to the connection (not merely queued for the writer), or fails by
// deadline: for answers whose delivery the caller acts on (the ready
// acknowledgement is sent before the node is activated).
func (st *Stream) SendWritten(env *iop.Envelope, deadline time.Time) error {
	if err := st.SendBy(env, deadline); err != nil {
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
	if st.queued == nil {
		st.qbuf = bufPool.Get().(*[]byte)
		st.queued = (*st.qbuf)[:0]
	}
	buf, err := AppendFrame(st.queued, env, st.maxFrame)
	if err != nil {
		if len(st.queued) == 0 {
			st.releaseQueueLocked()
		}
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
	if st.werr != nil {
		st.releaseQueueLocked()
		return st.werr
	}
	_, err := (*frameWriter)(st).Write(st.queued) // copies: the buffer is free again
	st.releaseQueueLocked()
	if err != nil {
		return fmt.Errorf("nodewire: write: %w", err)
	}
	return nil
}

// releaseQueueLocked hands the queue's buffer back (st.wmu held): a
// stream between batches holds none.
func (st *Stream) releaseQueueLocked() {
	if st.qbuf == nil {
		return
	}
	if cap(st.queued) <= 4*queueFlushAt { // don't keep huge buffers alive in the pool
		*st.qbuf = st.queued[:0]
		bufPool.Put(st.qbuf)
	}
	st.qbuf, st.queued = nil, nil
}

// Recv reads the next envelope. io.EOF means the peer closed its side
// cleanly between frames.
func (st *Stream) Recv() (*iop.Envelope, error) {
	st.rmu.Lock()
	defer st.rmu.Unlock()
	if st.rerr != nil {
		return nil, st.rerr
	}
	if !st.part.active() {
		// Wait with nothing held: a stream may be quiet for minutes.
		if err := st.s.waitReadable(); err != nil {
			return nil, err
		}
		if payload, ok := st.s.readWholeFrame(st.maxFrame); ok {
			return st.decodeFrame(payload)
		}
	}
	return st.recvPartialLocked()
}

// recvPartialLocked reads the next frame, or the rest of the one begun, as
// its bytes arrive (st.rmu held): the frame that has not all arrived, or
// one over the limit, which it refuses from the length. What ReadFrame
// returns for the same bytes it returns, except that a read deadline
// passing mid-frame keeps what was read for the next call.
func (st *Stream) recvPartialLocked() (*iop.Envelope, error) {
	p := &st.part
	for p.hdrN < frameHeaderLen {
		n, err := st.s.Read(p.hdr[p.hdrN:])
		p.hdrN += n
		if err != nil {
			if p.hdrN > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // inside a header
			}
			return nil, st.partFailedLocked(err) // io.EOF between frames
		}
	}
	if p.payload == nil {
		size := binary.BigEndian.Uint32(p.hdr[:])
		if err := checkFrameLen(size, st.maxFrame); err != nil {
			st.part, st.rerr = partialFrame{}, err
			return nil, err
		}
		p.need = int(size)
		p.payload = make([]byte, 0, min(p.need, eagerPayload))
	}
	for len(p.payload) < p.need {
		if len(p.payload) == cap(p.payload) {
			grown := make([]byte, len(p.payload), min(p.need, 2*cap(p.payload)))
			p.payload = grown[:copy(grown, p.payload)]
		}
		n, err := st.s.Read(p.payload[len(p.payload):min(cap(p.payload), p.need)])
		p.payload = p.payload[:len(p.payload)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, st.partFailedLocked(fmt.Errorf("nodewire: read payload: %w", err))
		}
	}
	payload := p.payload
	st.part = partialFrame{}
	return st.decodeFrame(payload)
}

// decodeFrame decodes a received frame's payload with the limits every
// frame of the stream is held to (the fan-out bound, then the decoder's):
// Recv and FirstQueued refuse the same frames.
func (st *Stream) decodeFrame(payload []byte) (*iop.Envelope, error) {
	if err := checkFanout(payload, st.fanout); err != nil {
		return nil, err
	}
	return DecodeEnvelope(payload)
}

// partFailedLocked returns err, from a read of the frame begun (st.rmu
// held). When only the read deadline passed, or the owner's done channel
// closed (SetDone), what was read is kept, for the next Recv to go on with
// (a drain after a cancellation); otherwise the stream failed or ended and
// no later read completes the frame, so it is dropped.
func (st *Stream) partFailedLocked(err error) error {
	if !errors.Is(err, errTimeout) && !errors.Is(err, ErrDone) {
		st.part = partialFrame{}
	}
	return err
}

// tunnelEnvelopes holds the decoded frames RecvLent lends.
var tunnelEnvelopes = sync.Pool{New: func() any { return new(tunnelEnvelope) }}

// putTunnelEnvelope clears te, so that the pool keeps no body alive, and
// hands it back.
func putTunnelEnvelope(te *tunnelEnvelope) {
	*te = tunnelEnvelope{}
	tunnelEnvelopes.Put(te)
}

// RecvLent is Recv for a caller done with what it returns before its next
// RecvLent on this stream. A tunnel BODY frame, how a streamed chunk
// arrives, is then lent: the frame and its body lie in memory the stream
// reuses for a later frame, so a chunk costs no allocation and, when it
// was all the stream held unread, no copy. A run's DELTA event, how a
// streamed run's output arrives, is lent too: its envelope, wrapper and
// event structs are reused for a later one (what the event holds, its
// strings and sub-messages, is decoded fresh and is the caller's). Every
// other envelope is the caller's, as Recv's are. Whatever was lent is
// taken back on entry, before the wait: a quiet stream holds nothing.
// Recv and RecvLent may be mixed; a stream dropped with a frame lent
// leaves it to the collector.
func (st *Stream) RecvLent() (*iop.Envelope, error) {
	st.rmu.Lock()
	defer st.rmu.Unlock()
	st.releaseLentLocked()
	if st.rerr != nil {
		return nil, st.rerr
	}
	if st.part.active() {
		return st.recvPartialLocked()
	}
	if err := st.s.waitReadable(); err != nil {
		return nil, err
	}
	payload, buf, ok := st.s.takeWholeFrame(st.maxFrame)
	if !ok {
		return st.recvPartialLocked()
	}
	if err := checkFanout(payload, st.fanout); err != nil {
		putRecvBuf(buf)
		return nil, err
	}
	tunnelFrame := false
	if inner, ok := onlyEnvelopeField(payload, fieldEnvelopeTunnelFrame); ok {
		tunnelFrame = true
		te := tunnelEnvelopes.Get().(*tunnelEnvelope)
		if te.decode(inner) {
			if te.frame.Kind == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY {
				st.lentEnv, st.lentBuf = te, buf
				return &te.env, nil
			}
			if te.frame.Body == nil {
				// A frame of another kind without a body (an answer's
				// END): nothing in it points into buf, so it is the
				// caller's, as Recv's envelopes are.
				putRecvBuf(buf)
				return &te.env, nil
			}
		}
		putTunnelEnvelope(te)
		// Its STATUS and USAGE frames (see tunnelhead.go).
		if env, ok := decodeTunnelHead(inner); ok {
			putRecvBuf(buf)
			return env, nil
		}
	} else if _, ok := onlyEnvelopeField(payload, fieldEnvelopeRunEvent); ok {
		re := runEnvelopes.Get().(*runEnvelope)
		if re.decode(payload) {
			st.lentRun = re
			putRecvBuf(buf) // re points into nothing of it
			return &re.env, nil
		}
		putRunEnvelope(re)
	}
	// Not lent. decodeGeneric copies out everything it keeps, so it
	// decodes straight from the receive buffer: a run's events (one per
	// streamed delta) and a tunnel's frames of any other shape (an ERROR
	// frame, METADATA: fewer allocations than a copy of the payload and
	// the fast path's decode of it). A tunnelled request is decoded by
	// DecodeEnvelope from a copy of its own (its body points into what it
	// decodes), as Recv decodes it.
	var env *iop.Envelope
	var err error
	if mayAlias(payload) && !tunnelFrame {
		env, err = DecodeEnvelope(bytes.Clone(payload))
	} else {
		env, err = decodeGeneric(payload)
	}
	putRecvBuf(buf)
	return env, err
}

// releaseLentLocked hands back to their pools what the last RecvLent lent,
// if anything (st.rmu held).
func (st *Stream) releaseLentLocked() {
	if st.lentEnv != nil {
		putTunnelEnvelope(st.lentEnv)
		putRecvBuf(st.lentBuf)
		st.lentEnv, st.lentBuf = nil, nil
	}
	if st.lentRun != nil {
		putRunEnvelope(st.lentRun)
		st.lentRun = nil
	}
}

// mayAlias reports whether DecodeEnvelope may return an envelope pointing
// into payload: its fast paths take payloads whose first field is a
// tunnel frame or a tunnel request; everything else goes to decodeGeneric.
func mayAlias(payload []byte) bool {
	num, typ, n := protowire.ConsumeTag(payload)
	return n > 0 && typ == protowire.BytesType && (num == fieldEnvelopeTunnelFrame || num == fieldEnvelopeTunnelRequest)
}

// FrameReady reports whether a whole frame has already arrived and is
// unread, so that the next Recv or RecvLent returns it without waiting on
// the peer. A relay asks before it flushes what it wrote: when the next
// frame is already here, one flush can carry both. It is a hint: false
// when unsure (part of a frame already read by a Recv that timed out), and a
// stream may fail after it said true (Recv then returns the failure at
// once). It must not be called concurrently with Recv.
func (st *Stream) FrameReady() bool {
	st.rmu.Lock()
	partial := st.part.active()
	st.rmu.Unlock()
	return !partial && st.s.frameReady(st.maxFrame)
}

// AfterReadable arranges for f to be started, once, in a goroutine of its
// own as soon as Recv can return without waiting on the peer for more than
// the rest of a frame it has begun: bytes arrived, the peer closed its
// side, or the stream failed (the read deadline does not count). It
// returns false, arranging nothing, when that is already so. It lets a
// caller watch a quiet stream without a goroutine parked in Recv; the
// caller must not Recv concurrently with it or with f.
func (st *Stream) AfterReadable(f func()) bool {
	// Recv reads nothing ahead of the frame it is in: every byte it has
	// not used is still the mux stream's, which this watches.
	return st.s.afterReadable(f)
}

// StopWatch disarms AfterReadable's f. It returns false when none was
// armed: never armed, or already started (the caller then synchronises
// with f itself).
func (st *Stream) StopWatch() bool { return st.s.stopWatch() }

// SetDone makes the stream's reads and writes that wait, now or later,
// fail with ErrDone once done closes (nil: none, the default), and a read
// fail so before it returns more data: the owner's way to stop on an
// event of its own (the edge's client gone: its request context's Done)
// without a goroutine or a callback registered on it. Anything that must
// still go through after that (a CancelRequest, reading to the terminal
// frame) clears it first.
func (st *Stream) SetDone(done <-chan struct{}) { st.s.setDone(done) }

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
	// the flush below give up rather than wait. For good: a sender that
	// takes wmu first must not set a later deadline and wait to it.
	st.s.stopWrites()
	_ = st.CloseWrite()
	st.s.abort(abortLinger)
}

// SetDeadline bounds both Send and Recv; zero clears it.
func (st *Stream) SetDeadline(t time.Time) error { return st.s.SetDeadline(t) }

// maxQueuedWalk bounds how many queued frames FirstQueued decodes from the
// first one before it looks only at the last: a decode is up to a few
// microseconds, a window can hold tens of thousands of tiny frames, and a
// fence walks every exchange of the node it fences holding the
// dispatcher's lock.
const maxQueuedWalk = 256

// FirstQueued is FirstQueuedWithin walking up to maxQueuedWalk frames.
func (st *Stream) FirstQueued(stop func(*iop.Envelope) bool) (env *iop.Envelope, ok bool) {
	return st.FirstQueuedWithin(stop, maxQueuedWalk)
}

// FirstQueuedWithin returns the first frame, among those that have arrived
// and are unread, for which stop is true, decoded from a copy of its own,
// and consumes nothing. A caller that must decide how an exchange ended
// without reading it (its reader is elsewhere) looks here for the
// terminal its reader will come to: a peer that sent more after its
// terminal does not hide it. stop sees the frames in order; the walk ends,
// ok false, at the first frame that Recv would refuse (it does not decode,
// or it decodes into more than the stream's fan-out bound: the reader
// fails there and never reaches a later one). Past walk frames (at most
// maxQueuedWalk; 0 or less: none) only the last whole frame is looked at
// (a peer's last frame is the one that ends its work when it sends
// nothing after it): a caller walking many streams at once shares its
// decodes out between them. ok is also false when no whole frame is
// queued, when a Recv is under way (it holds the frames' boundaries; the
// call never waits for it), or when the frame begun by a Recv that timed
// out has not all been read.
//
// The frames are decoded where they lie, the stream's buffer lock held so
// that nothing arriving moves them while stop looks: a fence walks every
// exchange of a lost node, and copying each one's backlog out first cost
// up to the session's whole bound of unread bytes (muxMaxBuffered) in
// allocations and copies under the dispatcher's lock. So stop must not
// keep the envelope it is shown, nor call into the stream; only the frame
// found is copied and decoded again for the caller.
func (st *Stream) FirstQueuedWithin(stop func(*iop.Envelope) bool, walk int) (env *iop.Envelope, ok bool) {
	if !st.rmu.TryLock() {
		return nil, false
	}
	defer st.rmu.Unlock()
	if st.rerr != nil || st.part.active() {
		return nil, false
	}
	s := st.s
	s.mu.Lock()
	found := bytes.Clone(st.firstQueuedIn(s.rbuf[s.roff:], stop, min(walk, maxQueuedWalk)))
	s.mu.Unlock()
	if found == nil {
		return nil, false
	}
	env, err := st.decodeFrame(found)
	return env, err == nil // decoded once already: it does not fail
}

// firstQueuedIn is the payload, within unread, of the frame
// FirstQueuedWithin answers, nil for none; the envelopes stop sees alias
// unread.
func (st *Stream) firstQueuedIn(unread []byte, stop func(*iop.Envelope) bool, walk int) []byte {
	// One pass over the length prefixes: a window of tiny frames is tens
	// of thousands of them per exchange. The walk stops at a length over
	// the limit or a frame not all here.
	limit := uint64(maxFrame(st.maxFrame))
	var last []byte
	for walked := 0; len(unread) >= frameHeaderLen; walked++ {
		size := binary.BigEndian.Uint32(unread)
		if uint64(size) > limit || uint64(len(unread)-frameHeaderLen) < uint64(size) {
			break
		}
		end := frameHeaderLen + int(size)
		// Capped: an envelope aliasing its payload cannot grow into the
		// next frame's bytes.
		payload := unread[frameHeaderLen:end:end]
		unread = unread[end:]
		if walked >= walk {
			last = payload
			continue
		}
		env, err := st.decodeFrame(payload)
		if err != nil {
			return nil
		}
		if stop(env) {
			return payload
		}
	}
	if last == nil {
		return nil
	}
	if env, err := st.decodeFrame(last); err != nil || !stop(env) {
		return nil
	}
	return last
}
