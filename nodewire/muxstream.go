package nodewire

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// muxStream is one stream of a muxSession: a byte stream in each direction
// with its own flow control, half-close (FIN) and abort (RST).
type muxStream struct {
	sess *muxSession
	id   atomic.Uint32 // 0 until the stream's first frame is queued (see announce)

	// wmu serialises writers and the half-close, so frames of one stream
	// are queued in order and the SYN rides on the first of them.
	wmu     sync.Mutex
	synSent atomic.Bool // set under wmu; true from the start when the peer opened the stream

	mu       sync.Mutex
	rbuf     []byte         // guarded by mu: received, unread bytes (rbuf[roff:])
	roff     int            // guarded by mu
	credit   uint32         // guarded by mu: bytes the peer may still send before a window update
	consumed uint32         // guarded by mu: bytes read since the last window update
	rclosed  bool           // guarded by mu: the peer sent FIN
	wclosed  bool           // guarded by mu: this side sent FIN
	sendWin  uint32         // guarded by mu: bytes this side may still send
	err      error          // guarded by mu: reset or session failure; ends both directions
	rdl, wdl streamDeadline // guarded by mu: the read and write deadlines
	// uncounted is guarded by mu: the stream left the session table, so
	// its unread bytes no longer count in sess.buffered.
	uncounted bool
	// discard is guarded by mu: the owner gave up on the stream (abort);
	// whatever the peer still sends is dropped and its credit returned.
	discard bool
	// linger is guarded by mu: the aborted stream's reset after its linger
	// (abort), stopped once the stream ends sooner (the peer's FIN or
	// reset, the session's failure), so a high rate of aborted exchanges
	// does not keep as many live timers, each holding its stream.
	linger *time.Timer
	// wstopped is guarded by mu: the owner gave up writing (stopWrites):
	// the write deadline stays passed, whatever a concurrent sender sets.
	wstopped bool

	// rwatch is guarded by mu: set by afterReadable, taken and started in a
	// goroutine of its own by the first data, FIN, reset or failure.
	rwatch func()

	rnotify chan struct{} // capacity 1: data, FIN, failure or the read deadline's expiry
	// wnotify is guarded by mu: capacity 1, window credit, failure or the
	// write deadline's expiry. Nil until a writer first waits
	// (wnotifyLocked): most streams' writes never do (a request that fits
	// the window, a held stream's cancellation), and a held stream then
	// keeps no channel it never reads (96 B). Whoever signals it reads it
	// under mu in the step that changed what the writer waits for, so a
	// writer that made it after looking finds the signal, and a nil one
	// has nobody to wake (notify of nil does nothing).
	wnotify chan struct{}
	// done is guarded by mu: when it closes, every wait of this stream's
	// reads and writes fails with ErrDone, and a read fails so before it
	// returns more data (setDone; nil: never). A channel the owner has
	// anyway (an HTTP request context's), observed by the waits this
	// stream's owner already makes, rather than a registration on it
	// (context.AfterFunc) that would cost the owner's context a children
	// map for as long as the exchange is held.
	done <-chan struct{}
}

func newMuxStream(s *muxSession, id uint32) *muxStream {
	st := &muxStream{
		sess: s, credit: muxWindow, sendWin: muxWindow,
		rnotify: make(chan struct{}, 1),
	}
	st.id.Store(id)
	return st
}

// wnotifyLocked is wnotify, made on the first call (st.mu held): for a
// writer about to wait on it.
func (st *muxStream) wnotifyLocked() chan struct{} {
	if st.wnotify == nil {
		st.wnotify = make(chan struct{}, 1)
	}
	return st.wnotify
}

// notify signals c; a nil c (a wnotify nobody has waited on) is left as is.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// StreamID is the stream's id on the connection; 0 before anything was
// sent on a stream this side opened.
func (st *muxStream) StreamID() uint32 { return st.id.Load() }

// Read reads received bytes; io.EOF after the peer's FIN once everything
// before it was read.
func (st *muxStream) Read(p []byte) (int, error) {
	for {
		st.mu.Lock()
		if st.roff < len(st.rbuf) {
			n := copy(p, st.rbuf[st.roff:])
			grant := st.consumeLocked(n, false)
			st.mu.Unlock()
			st.sendGrant(grant)
			return n, nil
		}
		if st.err != nil {
			err := st.err
			st.mu.Unlock()
			return 0, err
		}
		if st.rclosed {
			st.mu.Unlock()
			return 0, io.EOF
		}
		expired, done := st.rdl.expired, st.done
		st.mu.Unlock()
		if len(p) == 0 {
			return 0, nil
		}
		if expired {
			return 0, st.timedOut(st.rnotify)
		}
		if err := st.wait(st.rnotify, done); err != nil {
			return 0, err
		}
	}
}

// consumeLocked marks the first n unread bytes read (st.mu held) and
// returns the window credit to send the peer now (0: none yet). With
// handOff the caller has taken the buffer, which those n bytes drain.
func (st *muxStream) consumeLocked(n int, handOff bool) (grant uint32) {
	st.roff += n
	if !st.uncounted {
		st.sess.buffered.Add(-int64(n))
	}
	if st.roff == len(st.rbuf) {
		// Hand the buffer back once drained: a held stream keeps no
		// memory while it waits, and the next frame of any stream reuses
		// it.
		if !handOff {
			putRecvBuf(st.rbuf)
		}
		st.rbuf, st.roff = nil, 0
	}
	st.consumed += uint32(n)
	if st.consumed >= muxWindow/2 && st.err == nil && !st.rclosed {
		grant, st.consumed = st.consumed, 0
		st.credit += grant
	}
	return grant
}

// sendGrant sends the peer a window update of grant bytes (consumeLocked's
// result, after st.mu is released); 0 sends nothing.
func (st *muxStream) sendGrant(grant uint32) {
	if grant > 0 {
		_ = st.sess.enqueue(muxTypeWindow, 0, st.id.Load(), grant, nil, nil)
	}
}

// readWholeFrame returns the payload of the next wire frame when all of it
// (length prefix and payload) is among the unread bytes, copied out once,
// and consumes it; ok is false, consuming nothing, when it is not all
// there yet or its length is over maxSize (<= 0: DefaultMaxFrameSize),
// which the caller's general path then waits for or refuses. A stream's
// frames usually arrive whole, so most of them skip a buffered reader.
func (st *muxStream) readWholeFrame(maxSize int) (payload []byte, ok bool) {
	st.mu.Lock()
	n, ok := st.wholeFrameLocked(maxSize)
	if !ok {
		st.mu.Unlock()
		return nil, false
	}
	payload = make([]byte, n)
	copy(payload, st.rbuf[st.roff+frameHeaderLen:])
	grant := st.consumeLocked(frameHeaderLen+n, false)
	st.mu.Unlock()
	st.sendGrant(grant)
	return payload, true
}

// wholeFrameLocked returns the payload length of the next wire frame when
// all of it (length prefix and payload) is among the unread bytes and the
// length is within maxSize (<= 0: DefaultMaxFrameSize); st.mu held.
func (st *muxStream) wholeFrameLocked(maxSize int) (n int, ok bool) {
	unread := st.rbuf[st.roff:]
	if len(unread) < frameHeaderLen {
		return 0, false
	}
	size := binary.BigEndian.Uint32(unread)
	if uint64(size) > uint64(maxFrame(maxSize)) || uint64(len(unread)-frameHeaderLen) < uint64(size) {
		return 0, false
	}
	return int(size), true
}

// frameReady reports whether the next wire frame (within maxSize) is all
// among the unread bytes.
func (st *muxStream) frameReady(maxSize int) bool {
	st.mu.Lock()
	_, ok := st.wholeFrameLocked(maxSize)
	st.mu.Unlock()
	return ok
}

// takeWholeFrame is readWholeFrame for a caller that hands buf back
// (putRecvBuf) once done with payload, which lies in it. When the frame is
// all the stream holds unread (how a paced chunk arrives) buf is the
// stream's receive buffer itself, handed over with no copy, and the next
// frame takes another; otherwise the payload is copied into a pooled
// buffer.
func (st *muxStream) takeWholeFrame(maxSize int) (payload, buf []byte, ok bool) {
	st.mu.Lock()
	n, ok := st.wholeFrameLocked(maxSize)
	if !ok {
		st.mu.Unlock()
		return nil, nil, false
	}
	unread := st.rbuf[st.roff:]
	size := frameHeaderLen + n
	handOff := size == len(unread)
	if handOff {
		buf, payload = st.rbuf, unread[frameHeaderLen:size:size]
	} else {
		buf = append(getRecvBuf(n), unread[frameHeaderLen:size]...)
		payload = buf[:n:n]
	}
	grant := st.consumeLocked(size, handOff)
	st.mu.Unlock()
	st.sendGrant(grant)
	return payload, buf, true
}

// waitReadable blocks until a Read would return without waiting: unread
// bytes, the peer's FIN or a failure (nil), or the read deadline passes
// (its error). It holds no buffer while it waits.
//
// Once the stream's done channel (setDone) has closed it fails with
// ErrDone even when data is there: the owner gave up, and a stream whose
// frames never stop coming must not hide that (as a cancellation stops
// the relay at its next frame).
func (st *muxStream) waitReadable() error {
	for {
		st.mu.Lock()
		done := st.done
		if closed(done) {
			st.mu.Unlock()
			return ErrDone
		}
		if st.readableLocked() {
			st.mu.Unlock()
			return nil
		}
		expired := st.rdl.expired
		st.mu.Unlock()
		if expired {
			return st.timedOut(st.rnotify)
		}
		if err := st.wait(st.rnotify, done); err != nil {
			return err
		}
	}
}

// closed reports whether done (nil: never) has closed, without waiting.
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// wait blocks until c is signalled or the session closes, which fails the
// stream (a stream not yet announced is in no session table), or returns
// ErrDone once done (the stream's done channel as the caller read it
// under mu; nil: none) closes. The caller looks again at what it waits
// for, which includes its direction's deadline: the deadline's timer
// signals c when it expires.
func (st *muxStream) wait(c chan struct{}, done <-chan struct{}) error {
	select {
	case <-c:
	case <-st.sess.done:
		st.fail(st.sess.streamErr())
	case <-done:
		return ErrDone
	}
	return nil
}

// setDone makes done the stream's done channel (nil: none): a read or
// write waiting on the stream, now or later, fails with ErrDone once it
// closes. Waits already blocked see the new channel on their next wake-up;
// the owner sets it before the waits it means it for.
func (st *muxStream) setDone(done <-chan struct{}) {
	st.mu.Lock()
	st.done = done
	st.mu.Unlock()
}

// waitQueue blocks until drained is signalled (the session's writer took
// the frames queued ahead), or fails when the stream's write deadline
// passes, the stream fails or the session closes. The deadline is looked
// at on every wake-up, not read once: its timer signals wnotify when it
// expires, so a deadline moved while the write waits (a client gone, an
// Abort) ends the wait on our clock, not when the peer reads.
func (st *muxStream) waitQueue(drained <-chan struct{}) error {
	for {
		st.mu.Lock()
		err, expired, done := st.err, st.wdl.expired, st.done
		var wake chan struct{}
		if err == nil {
			wake = st.wnotifyLocked()
		}
		st.mu.Unlock()
		if err != nil {
			return err
		}
		if expired {
			return st.timedOut(wake)
		}
		select {
		case <-drained:
			return nil
		case <-wake:
		case <-st.sess.done:
			return st.sess.streamErr()
		case <-done:
			return ErrDone
		}
	}
}

// timedOut returns errTimeout for a wait on c whose deadline has expired,
// passing the expiry's signal on: another goroutine waiting on c (two
// readers of one stream) sees it too.
func (st *muxStream) timedOut(c chan struct{}) error {
	notify(c)
	return errTimeout
}

// Write queues p as data frames, waiting for window credit as needed. A
// nil return means the bytes are queued for the connection, as with a
// socket's send buffer.
func (st *muxStream) Write(p []byte) (int, error) {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	if len(p) == 0 {
		if st.synSent.Load() {
			return 0, nil
		}
		// An empty write opens the stream on the peer, nothing more.
		return 0, st.sendLocked(nil, 0)
	}
	written := 0
	for written < len(p) {
		st.mu.Lock()
		switch {
		case st.err != nil:
			err := st.err
			st.mu.Unlock()
			return written, err
		case st.wclosed:
			st.mu.Unlock()
			return written, errStreamClosed
		case st.sendWin == 0:
			expired, wake, done := st.wdl.expired, st.wnotifyLocked(), st.done
			st.mu.Unlock()
			if expired {
				return written, st.timedOut(wake)
			}
			if err := st.wait(wake, done); err != nil {
				return written, err
			}
			continue
		}
		n := min(len(p)-written, int(st.sendWin), muxMaxData)
		st.sendWin -= uint32(n)
		st.mu.Unlock()
		if err := st.sendLocked(p[written:written+n], 0); err != nil {
			// Nothing of it was queued: the credit is still ours.
			st.mu.Lock()
			st.sendWin += uint32(n)
			st.mu.Unlock()
			return written, err
		}
		written += n
	}
	return written, nil
}

// sendLocked queues one data frame; st.wmu must be held.
func (st *muxStream) sendLocked(payload []byte, flags uint16) error {
	// Only payload waits for the writer to catch up: an empty frame (open,
	// FIN) must go out even when the write deadline has passed, or the
	// peer would never learn the stream ended.
	var waiter *muxStream
	if len(payload) > 0 {
		waiter = st
	}
	var err error
	if !st.synSent.Load() {
		err = st.sess.announce(st, flags|flagSYN, payload, waiter)
	} else {
		err = st.sess.enqueue(muxTypeData, flags, st.id.Load(), uint32(len(payload)), payload, waiter)
	}
	if err != nil {
		return fmt.Errorf("nodewire: stream %d: %w", st.id.Load(), err)
	}
	return nil
}

// Close half-closes the stream: the peer reads io.EOF after everything
// written before. Reading goes on until the peer closes too. Closing twice
// returns errStreamClosed.
func (st *muxStream) Close() error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.mu.Lock()
	if st.err != nil {
		err := st.err
		st.mu.Unlock()
		return err
	}
	if st.wclosed {
		st.mu.Unlock()
		return errStreamClosed
	}
	st.wclosed = true
	st.deadlinesOffLocked()
	done, wake := st.rclosed, st.wnotify
	st.mu.Unlock()
	notify(wake)
	err := st.sendLocked(nil, flagFIN)
	if done {
		st.sess.forget(st.id.Load())
	}
	return err
}

// Reset aborts the stream in both directions; the peer's reads and writes
// on it fail. Unread data is discarded.
func (st *muxStream) Reset() {
	st.mu.Lock()
	if st.err != nil || (st.rclosed && st.wclosed) {
		st.mu.Unlock()
		return
	}
	st.err = errStreamReset
	st.dropLocked()
	st.deadlinesOffLocked()
	// Read under mu: announce sets both under mu, so a stream is either
	// never announced (its first write now fails) or reset on the wire.
	announced, id := st.synSent.Load(), st.id.Load()
	watch, wake := st.takeWatchLocked(), st.wnotify
	st.mu.Unlock()
	notify(st.rnotify)
	notify(wake)
	startWatch(watch)
	if id != 0 {
		st.sess.forget(id)
	}
	if announced {
		_ = st.sess.enqueue(muxTypeData, flagRST, id, 0, nil, nil)
	}
}

// dropLocked discards unread data (st.mu held), returning its bytes to
// the session's buffer bound.
func (st *muxStream) dropLocked() {
	st.uncountLocked()
	putRecvBuf(st.rbuf)
	st.rbuf, st.roff = nil, 0
}

// uncountLocked takes the stream's unread bytes out of the session's count
// for good (st.mu held).
func (st *muxStream) uncountLocked() {
	if st.uncounted {
		return
	}
	st.uncounted = true
	if unread := len(st.rbuf) - st.roff; unread > 0 {
		st.sess.buffered.Add(-int64(unread))
	}
}

// deliver hands a received data frame's payload and flags to the stream;
// only the session reader calls it. A payload beyond the granted credit
// breaks the protocol.
func (st *muxStream) deliver(payload []byte, flags uint16) error {
	st.mu.Lock()
	if flags&flagRST != 0 {
		if st.err == nil {
			st.err = errStreamReset
			if st.rclosed {
				// The peer had finished sending: what it sent stays
				// readable (a slow consumer may not have read an answer's
				// tail yet); only writing fails.
				st.uncountLocked()
			} else {
				st.dropLocked()
			}
			st.deadlinesOffLocked()
		}
		watch, wake := st.takeWatchLocked(), st.wnotify
		st.mu.Unlock()
		notify(st.rnotify)
		notify(wake)
		startWatch(watch)
		st.sess.forget(st.id.Load())
		return nil
	}
	if uint32(len(payload)) > st.credit {
		st.mu.Unlock()
		return fmt.Errorf("%w: stream %d sent %d bytes beyond its window", ErrProtocol, st.id.Load(), len(payload))
	}
	st.credit -= uint32(len(payload))
	if st.rclosed && len(payload) > 0 {
		st.mu.Unlock()
		return fmt.Errorf("%w: stream %d sent data after FIN", ErrProtocol, st.id.Load())
	}
	overflow, credited := false, uint32(0)
	if st.discard && len(payload) > 0 {
		// Nobody reads an aborted stream: drop the bytes and hand their
		// credit back, so the peer's writer never blocks on it.
		credited = uint32(len(payload))
		st.credit += credited
	} else if st.err == nil && len(payload) > 0 {
		if st.sess.buffered.Add(int64(len(payload))) > muxMaxBuffered {
			// The session holds too much unread data: this stream's
			// frame is dropped and the stream reset, never buffered.
			st.sess.buffered.Add(-int64(len(payload)))
			overflow = true
		} else {
			if st.roff > 0 && st.roff == len(st.rbuf) {
				st.rbuf, st.roff = st.rbuf[:0], 0
			}
			if st.rbuf == nil {
				st.rbuf = getRecvBuf(len(payload))
			} else if len(st.rbuf)+len(payload) > cap(st.rbuf) {
				st.makeRoomLocked(len(payload))
			}
			st.rbuf = append(st.rbuf, payload...)
		}
	}
	if overflow {
		st.mu.Unlock()
		st.Reset()
		return nil
	}
	finished := false
	if flags&flagFIN != 0 {
		st.rclosed = true
		st.deadlinesOffLocked()
		finished = st.wclosed
	}
	var watch func()
	if st.readableLocked() {
		watch = st.takeWatchLocked()
	}
	st.mu.Unlock()
	// Sent with st.mu released, as every frame is: a peer that does not
	// read makes enqueue close the session, which fails this stream too.
	st.sendGrant(credited)
	notify(st.rnotify)
	startWatch(watch)
	if finished {
		st.sess.forget(st.id.Load())
	}
	return nil
}

// makeRoomLocked makes room for n more bytes at the end of rbuf (st.mu
// held), for frames that arrive faster than the stream is read (an
// unpaced answer's burst). When the unread bytes and n fill at most half
// the buffer, the unread bytes slide to its front; otherwise they move to
// a buffer at least twice as large: the large pooled class when they fit
// it (a burst up to a tunnel body frame costs no allocation), else a new
// one. A move at least doubles the buffer, up to twice the window, past
// which every frame slides; a slide frees at least half the buffer. So a
// reader that lags copies each byte a bounded number of times, and the
// bytes already read are never carried along: appending kept them until
// the reader drained the stream, and a reader always a little behind held
// the whole answer.
func (st *muxStream) makeRoomLocked(n int) {
	unread := st.rbuf[st.roff:]
	need := len(unread) + n
	if need <= cap(st.rbuf)/2 {
		st.rbuf, st.roff = st.rbuf[:copy(st.rbuf, unread)], 0
		return
	}
	var nb []byte
	if need <= recvLarge && 2*cap(st.rbuf) <= recvLarge {
		nb = getRecvBuf(recvLarge)
	} else {
		// Never past twice the window: unread bytes stay within the
		// window, so a buffer that large always slides.
		nb = make([]byte, 0, max(need, min(2*cap(st.rbuf), 2*muxWindow)))
	}
	nb = append(nb, unread...)
	putRecvBuf(st.rbuf)
	st.rbuf, st.roff = nb, 0
}

// grant adds window credit from the peer.
func (st *muxStream) grant(n uint32) error {
	st.mu.Lock()
	if uint64(st.sendWin)+uint64(n) > 1<<31 {
		st.mu.Unlock()
		return fmt.Errorf("%w: stream %d window overflow", ErrProtocol, st.id.Load())
	}
	st.sendWin += n
	wake := st.wnotify
	st.mu.Unlock()
	notify(wake)
	return nil
}

// fail ends the stream because the session closed.
func (st *muxStream) fail(err error) {
	st.mu.Lock()
	if st.err == nil {
		st.err = err
		st.deadlinesOffLocked()
	}
	// Data received before the failure stays readable (the peer may have
	// sent its last frame and hung up).
	watch, wake := st.takeWatchLocked(), st.wnotify
	st.mu.Unlock()
	notify(st.rnotify)
	notify(wake)
	startWatch(watch)
}

// readableLocked reports whether a Read would return without waiting
// (st.mu held): unread bytes, the peer's FIN, or a failure.
func (st *muxStream) readableLocked() bool {
	return st.roff < len(st.rbuf) || st.rclosed || st.err != nil
}

// afterReadable arranges for f to be started, once, in a goroutine of its
// own as soon as a Read would return without waiting: data, the peer's
// FIN, a reset or a failure. It returns false, arranging nothing, when
// that is already so. A later call replaces an armed f.
func (st *muxStream) afterReadable(f func()) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.readableLocked() {
		return false
	}
	st.rwatch = f
	return true
}

// stopWatch disarms the f of afterReadable; false means there was none
// armed: it was never armed, or it has been started.
func (st *muxStream) stopWatch() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	armed := st.rwatch != nil
	st.rwatch = nil
	return armed
}

// takeWatchLocked takes the armed watch, if any (st.mu held); the caller
// starts it with startWatch once it has released st.mu.
func (st *muxStream) takeWatchLocked() func() {
	f := st.rwatch
	st.rwatch = nil
	return f
}

func startWatch(f func()) {
	if f != nil {
		// Owner: whoever armed f (afterReadable); stops when f returns.
		go f()
	}
}

// SetReadDeadline bounds blocked and future reads; zero clears it.
func (st *muxStream) SetReadDeadline(t time.Time) error {
	st.mu.Lock()
	passed := st.rdl.setLocked(t, st, (*muxStream).expireRead)
	st.mu.Unlock()
	if passed {
		notify(st.rnotify)
	}
	return nil
}

// SetWriteDeadline bounds blocked and future writes; zero clears it.
// After stopWrites it does nothing.
func (st *muxStream) SetWriteDeadline(t time.Time) error {
	st.mu.Lock()
	if st.wstopped {
		st.mu.Unlock()
		return nil
	}
	passed := st.wdl.setLocked(t, st, (*muxStream).expireWrite)
	if t.IsZero() {
		// Cleared: the timer goes too. A write deadline bounds a send (the
		// edge's request, a node's answer to a cancellation) and is then
		// cleared, while the stream may be held for minutes; a read
		// deadline is not dropped, as one is cleared and set again within
		// an exchange (dispatch's response and idle deadlines), which
		// would then cost a new timer each time.
		st.wdl.dropLocked()
	}
	wake := st.wnotify
	st.mu.Unlock()
	if passed {
		notify(wake)
	}
	return nil
}

// stopWrites makes every blocked and future write that would wait fail at
// once, for good (Abort): a sender that sets its own deadline afterwards
// (SendBy, or a SetWriteDeadline before a Send) would otherwise wait to
// that deadline for credit the peer never grants, holding the stream's
// writers, and Abort behind them.
func (st *muxStream) stopWrites() {
	st.mu.Lock()
	passed := st.wdl.setLocked(time.Now(), st, (*muxStream).expireWrite)
	st.wstopped = true
	wake := st.wnotify
	st.mu.Unlock()
	if passed {
		notify(wake)
	}
}

// expireRead and expireWrite run on their deadline's timer.
func (st *muxStream) expireRead()  { st.expire(&st.rdl, false) }
func (st *muxStream) expireWrite() { st.expire(&st.wdl, true) }

// expire fires d, the write deadline when write is set (its channel read
// under mu, see wnotify), else the read deadline.
func (st *muxStream) expire(d *streamDeadline, write bool) {
	st.mu.Lock()
	fired := d.fireLocked()
	wake := st.rnotify
	if write {
		wake = st.wnotify
	}
	st.mu.Unlock()
	if fired {
		notify(wake)
	}
}

// deadlinesOffLocked disarms the deadline of each direction that can no
// longer wait (st.mu held): a failed stream waits in neither, a read
// side past the peer's FIN returns what is left and then io.EOF, and a
// closed write side refuses writes.
func (st *muxStream) deadlinesOffLocked() {
	if st.err != nil || st.rclosed {
		st.rdl.offLocked()
		// An aborted stream has closed its write side: the peer's FIN, a
		// reset or a failure ends it, and its linger with it.
		if st.linger != nil {
			st.linger.Stop()
			st.linger = nil
		}
	}
	if st.err != nil || st.wclosed {
		st.wdl.offLocked()
	}
}

// SetDeadline sets both deadlines.
func (st *muxStream) SetDeadline(t time.Time) error {
	_ = st.SetReadDeadline(t)
	return st.SetWriteDeadline(t)
}

// abort gives up on the stream after its owner half-closed it: unread data
// is dropped, whatever the peer still sends is discarded (deliver), the
// stream is forgotten at the peer's FIN, and reset after linger if the peer
// never sends one. No goroutine waits for it: a timer does.
func (st *muxStream) abort(linger time.Duration) {
	st.mu.Lock()
	if st.err != nil || st.discard {
		st.mu.Unlock()
		return
	}
	st.discard = true
	// The dropped bytes and those read since the last window update are
	// the peer's credit: handed back, a peer whose writes had filled the
	// window sends on (into the discard) and ends with its FIN rather
	// than waiting for the linger's reset.
	var credit uint32
	if !st.rclosed {
		credit = uint32(len(st.rbuf)-st.roff) + st.consumed
		st.consumed = 0
		st.credit += credit
	}
	st.dropLocked()
	if !st.rclosed || !st.wclosed { // both sides closed: already forgotten
		// Armed under mu, so the peer's FIN (deliver), a reset or the
		// session's failure, which stop it (deadlinesOffLocked), find it.
		st.linger = time.AfterFunc(linger, st.Reset)
	}
	st.mu.Unlock()
	st.sendGrant(credit)
}
