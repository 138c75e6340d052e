package nodewire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The multiplexer carries many streams over the one TCP (or TLS) connection
// a Node dials. It is built for this wire's traffic: short request/response
// exchanges and long streams of small frames. Compared with a general
// multiplexer it
//
//   - opens a stream with its first data frame (no separate SYN, no ACK), so
//     a whole request — open, frames, half-close — can leave in one write;
//   - never makes a writer wait for the socket: frames are appended to one
//     session buffer that a single writer goroutine flushes, so frames of
//     many streams share a write system call under load;
//   - reads with one goroutine that hands payloads to streams directly.
//
// Frame layout (all integers big-endian), 12-byte header then payload:
//
//	version(1)=1 | type(1) | flags(2) | stream id(4) | length(4)
//
// Type data (0) carries `length` payload bytes (at most muxMaxData); flags
// SYN opens the stream, FIN ends the sender's side, RST aborts the stream
// in both directions. Type window (1) carries no payload: `length` is
// credit the receiver grants the sender on that stream. Every stream starts
// with muxWindow bytes of credit, so one stream whose reader stalls stops
// only its own writer. The dialing side (Node) uses odd stream ids, the
// accepting side (Edge) even ones.
const (
	muxVersion   = 1
	muxHeaderLen = 12

	muxTypeData   = 0
	muxTypeWindow = 1

	flagSYN = 1 << 0
	flagFIN = 1 << 1
	flagRST = 1 << 2

	// muxWindow is each stream's initial receive window. It bounds what a
	// peer can buffer in this process per stream it does not read.
	muxWindow = 256 << 10
	// muxMaxData bounds one data frame's payload; it fits the reader's
	// buffer, so payloads are handed over without an intermediate copy.
	muxMaxData = 32 << 10
	// muxReadBuffer is the session reader's buffer.
	muxReadBuffer = 64 << 10
	// muxCoalesceBelow: a writer woken with fewer pending bytes than this
	// first lets every goroutine that is already runnable queue its frames
	// (writeLoop), so that a batch of streams readied together goes out in
	// one write instead of one write each.
	muxCoalesceBelow = 16 << 10
	// muxWriteChunk bounds one write to the connection (writeAll): a peer
	// is dropped when it takes less than this in muxWriteTimeout (6.4 KiB/s
	// by default). That holds because the socket's unsent bytes are bounded
	// (wireNotSentLowat): otherwise a writer blocked on the 4 MiB buffer
	// the kernel grows waits for ~1.3 MiB to drain, and a peer reading
	// steadily below ~140 KB/s would be dropped as if it had stopped.
	muxWriteChunk = 64 << 10
	// wireNotSentLowat is TCP_NOTSENT_LOWAT on every wire connection, both
	// sides (internal/sockopt): the writer is woken once fewer than half
	// of it wait unsent, so one muxWriteChunk drained wakes it.
	wireNotSentLowat = 128 << 10
	// muxMaxPending is how many frame bytes may wait for the writer before
	// data writers block (control frames never do): the socket's
	// backpressure reaches writers instead of unbounded buffering.
	muxMaxPending = 1 << 20
	// muxAcceptBacklog is how many opened streams may wait for Accept.
	// Beyond it the reader waits (muxAcceptWait) for room, and a new
	// stream is reset only if none comes.
	muxAcceptBacklog = 1024
	// muxMaxBuffered bounds the bytes received and not yet read across all
	// streams of a session (each stream is also bounded by its window):
	// beyond it, the stream whose frame overflows is reset and the frame
	// dropped, never buffered.
	muxMaxBuffered = 128 << 20
)

// Bounds on a peer that does not read (variables only so tests can shrink
// them).
var (
	// muxMaxControlPending bounds frames queued for a peer that does not
	// read: control frames (window updates, resets) never wait, so a peer
	// that floods opens and never reads would grow the queue forever;
	// beyond this the session is closed.
	muxMaxControlPending = 4 * muxMaxPending
	// muxWriteTimeout bounds one write to the connection (at most
	// muxWriteChunk bytes): a peer that stops reading is dropped (and, for
	// a node, fenced) once the writer has been stuck this long.
	muxWriteTimeout = 10 * time.Second
)

var (
	// errStreamClosed is a write after the stream's own half-close.
	errStreamClosed = errors.New("nodewire: stream closed for writing")
	// errStreamReset is an operation on a stream either side reset.
	errStreamReset = errors.New("nodewire: stream reset")
	// errSessionClosed is an operation on a closed session.
	errSessionClosed = errors.New("nodewire: session closed")
	// ErrStreamIDsExhausted: the session has opened its last stream id
	// (about 2^31 streams). It opens no more; it closes once the streams
	// it opened end (at most idsDrainGrace later), and the node dials a
	// fresh connection.
	ErrStreamIDsExhausted = errors.New("nodewire: stream ids exhausted")
)

// idsDrainGrace bounds how long a session whose stream ids are spent
// waits for the streams it opened to end before it closes with them.
// A var for tests.
var idsDrainGrace = 5 * time.Minute

// muxMaxPeerStreams bounds the streams the peer has open on a session at
// once: those it opened that are not yet finished both ways or reset.
// Every further open is reset on arrival, its payload dropped, until one
// of them ends. It bounds a node's memory against an edge that opens
// streams faster than they end (broken, or not the edge at all): an open
// is a 12-byte frame, and each stream held costs the node a stream and,
// once served, a handler (see maxServeHandlers); 100,000 opens cost over
// 500 MB. A real edge has one open per exchange in flight, plus those a
// finished exchange lingers on (abortLinger). A variable only for tests,
// which shrink it; a session reads it once.
var muxMaxPeerStreams = 1 << 16

// muxAcceptWait bounds how long the reader waits for room in a full accept
// backlog (muxAcceptBacklog). A burst of opens (thousands of requests
// reaching the edge at once) can outrun an acceptor that only hands
// streams to goroutines, while the reader keeps the CPU: waiting lets it
// catch up instead of refusing requests the node has capacity for. The
// whole session's reading waits with it, so a backlog that does not drain
// (no Accept at all) costs the peer this long per refused stream. A
// variable only for tests, which shrink it; a session reads it once.
var muxAcceptWait = time.Second

// muxSession is one multiplexed connection. It owns exactly two goroutines:
// the reader (readLoop) and the writer (writeLoop).
type muxSession struct {
	conn   net.Conn
	client bool
	// peerOpens bounds the streams the peer may open over the session's
	// life (the edge lets a node open only its control stream); every
	// later open is reset on arrival without buffering. Negative: no bound.
	peerOpens int
	// buffered counts received bytes not yet read, across all streams.
	buffered atomic.Int64

	mu       sync.Mutex
	streams  map[uint32]*muxStream // guarded by mu: open streams by id
	nextID   uint32                // guarded by mu: next id this side opens
	maxPeer  uint32                // guarded by mu: highest id the peer opened
	opened   int                   // guarded by mu: streams the peer opened
	closeErr error                 // guarded by mu: why the session closed
	lostErr  error                 // guarded by mu: closeErr as the streams report it (streamCause)
	// own counts this side's streams in streams; with exhausted set (the
	// ids are spent) the session closes when it reaches zero, or when
	// drainTimer fires. Guarded by mu.
	own        int
	exhausted  atomic.Bool // set under mu; read without (Conn.IsClosed)
	drainTimer *time.Timer
	// live counts the peer's streams in streams (guarded by mu); at
	// maxLive (muxMaxPeerStreams when the session started; fixed) a new
	// open is refused.
	live, maxLive int

	wmu     sync.Mutex
	pending []byte        // guarded by wmu: frames waiting for the writer
	spare   []byte        // guarded by wmu: the writer's last buffer, for reuse
	drained chan struct{} // guarded by wmu: closed when the writer takes pending; nil while nobody waits
	wake    chan struct{} // capacity 1: pending has frames
	queued  int64         // guarded by wmu: bytes ever appended to pending
	// burstAt (guarded by wmu) is when the writer last wrote a batch
	// that filled a quarter of a buffer over muxSpareKeep (keepSpareLocked).
	burstAt time.Time

	// written counts bytes the writer has written to the connection;
	// progress (guarded by wmu; nil while nobody waits) is closed after
	// each write, for waitWritten.
	written  atomic.Int64
	progress chan struct{}

	accept     chan *muxStream
	acceptWait time.Duration // muxAcceptWait when the session started
	done       chan struct{} // closed once the session is closed
	closeOnce  sync.Once
	wg         sync.WaitGroup // reader and writer
}

func newMuxSession(conn net.Conn, client bool, peerOpens int) *muxSession {
	s := &muxSession{
		conn:       conn,
		client:     client,
		peerOpens:  peerOpens,
		maxLive:    muxMaxPeerStreams,
		streams:    make(map[uint32]*muxStream),
		nextID:     2,
		wake:       make(chan struct{}, 1),
		accept:     make(chan *muxStream, muxAcceptBacklog),
		acceptWait: muxAcceptWait,
		done:       make(chan struct{}),
	}
	if client {
		s.nextID = 1
	}
	s.wg.Add(2)
	// Owner: the session. Stops when the connection fails or is closed
	// (Close closes it), or on a protocol violation.
	go func() {
		defer s.wg.Done()
		s.closeWith(s.readLoop())
	}()
	// Owner: the session. Stops when the session closes or a write fails.
	go func() {
		defer s.wg.Done()
		s.writeLoop()
	}()
	return s
}

// muxClient starts the dialing side's session on conn: the edge opens any
// number of streams to it.
func muxClient(conn net.Conn) *muxSession { return newMuxSession(conn, true, -1) }

// muxServer starts the accepting side's session on conn, accepting any
// number of peer streams (the edge itself bounds them: Conn.startMux).
func muxServer(conn net.Conn) *muxSession { return newMuxSession(conn, false, -1) }

// OpenStream returns a new stream. Nothing is sent, and it has no id, until
// its first write or close, which carries the SYN.
func (s *muxSession) OpenStream() (*muxStream, error) {
	if s.IsClosed() {
		return nil, s.streamErr()
	}
	if s.Exhausted() {
		return nil, ErrStreamIDsExhausted
	}
	return newMuxStream(s, 0), nil
}

// AcceptStreamWithContext waits for the next stream the peer opens.
func (s *muxSession) AcceptStreamWithContext(ctx context.Context) (*muxStream, error) {
	select {
	case st := <-s.accept:
		return st, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		return nil, s.err()
	}
}

// Close closes the connection, fails every stream and waits for the reader
// and writer. It must not be called from those two goroutines.
func (s *muxSession) Close() error {
	s.closeWith(errSessionClosed)
	s.wg.Wait()
	return nil
}

// CloseChan is closed when the session has closed for any reason.
func (s *muxSession) CloseChan() <-chan struct{} { return s.done }

// IsClosed reports whether the session has closed.
func (s *muxSession) IsClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// NumStreams is the number of streams not yet closed in both directions.
func (s *muxSession) NumStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

func (s *muxSession) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeErr
}

// streamErr is why the session closed, as its streams report it
// (streamCause).
func (s *muxSession) streamErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostErr
}

// streamCause is a session's close cause as its streams report it. A
// timeout there is the writer's write to a peer that stopped reading; a
// stream that failed with it would read as its own deadline passing
// (os.ErrDeadlineExceeded, a net.Error that timed out), which its owner
// takes for an answer that did not come in time rather than a lost
// connection: the edge answers a timeout where it would fail over to
// another node. Such a cause is kept as text only; any other (a protocol
// violation, the peer's hang-up) stays in the chain. The session's own
// cause (err, and so the Conn's) keeps the timeout: the node stopped
// reading. It returns nil for a cause the streams report as it is.
func streamCause(cause error) error {
	var ne net.Error
	if !errors.Is(cause, errTimeout) && !(errors.As(cause, &ne) && ne.Timeout()) {
		return nil
	}
	return fmt.Errorf("%w: %v", errSessionClosed, cause)
}

// closeWith closes the session recording cause; the first cause wins. The
// session reads as closed (IsClosed, done) before any stream fails, so a
// stream's owner can tell its error came from the connection.
func (s *muxSession) closeWith(cause error) {
	s.closeOnce.Do(func() {
		if cause == nil {
			cause = errSessionClosed
		}
		lost := streamCause(cause)
		if !errors.Is(cause, errSessionClosed) {
			cause = fmt.Errorf("%w: %w", errSessionClosed, cause)
		}
		if lost == nil {
			lost = cause
		}
		s.mu.Lock()
		s.closeErr, s.lostErr = cause, lost
		streams := s.streams
		s.streams = map[uint32]*muxStream{}
		s.own, s.live = 0, 0
		if s.drainTimer != nil {
			s.drainTimer.Stop()
		}
		s.mu.Unlock()
		close(s.done)
		_ = closeNow(s.conn)
		for _, st := range streams {
			st.fail(lost)
		}
	})
}

// forget drops a stream that is finished in both directions or reset. Its
// unread bytes stop counting against the session's bound: they belong to
// whoever still holds the stream, and go with it.
func (s *muxSession) forget(id uint32) {
	s.mu.Lock()
	st := s.streams[id]
	delete(s.streams, id)
	drained := false
	if st != nil {
		if s.ownID(id) {
			s.own--
			drained = s.exhausted.Load() && s.own == 0
		} else {
			s.live--
		}
	}
	s.mu.Unlock()
	if drained {
		s.closeWith(ErrStreamIDsExhausted)
	}
	if st != nil {
		st.mu.Lock()
		st.uncountLocked()
		st.mu.Unlock()
	}
}

// putHeader encodes a frame header into b.
func putHeader(b []byte, typ byte, flags uint16, id, length uint32) {
	b[0] = muxVersion
	b[1] = typ
	binary.BigEndian.PutUint16(b[2:4], flags)
	binary.BigEndian.PutUint32(b[4:8], id)
	binary.BigEndian.PutUint32(b[8:12], length)
}

// enqueue appends one frame for the writer. A stream's data frames
// (waiter, the stream, non-nil) block while muxMaxPending bytes are
// already waiting, until the writer takes them, the stream's write
// deadline passes or the stream or session fails (muxStream.waitQueue);
// control frames (waiter nil) never block, so the reader and a closing
// stream cannot stall.
func (s *muxSession) enqueue(typ byte, flags uint16, id uint32, length uint32, payload []byte, waiter *muxStream) error {
	if err := s.lockPending(waiter); err != nil {
		return err
	}
	if waiter == nil && len(s.pending) >= muxMaxControlPending {
		// The peer has not read for a long while and keeps making us
		// answer: drop it rather than buffer without bound.
		s.wmu.Unlock()
		s.closeWith(fmt.Errorf("%w: peer does not read (%d bytes queued)", ErrProtocol, muxMaxControlPending))
		return s.err()
	}
	s.appendLocked(typ, flags, id, length, payload)
	s.unlockPending()
	return nil
}

// announce queues a new stream's first frame (flags include SYN). The id is
// given out in the same step, so ids reach the peer in increasing order
// however streams are opened and first written concurrently.
func (s *muxSession) announce(st *muxStream, flags uint16, payload []byte, waiter *muxStream) error {
	if err := s.lockPending(waiter); err != nil {
		return err
	}
	s.mu.Lock()
	if s.lostErr != nil {
		err := s.lostErr
		s.mu.Unlock()
		s.wmu.Unlock()
		return err
	}
	id := s.nextID
	if id > ^uint32(0)-2 {
		drained := s.exhaustLocked()
		s.mu.Unlock()
		s.wmu.Unlock()
		if drained {
			s.closeWith(ErrStreamIDsExhausted)
		}
		return ErrStreamIDsExhausted
	}
	// A stream reset before its first frame is never announced; one
	// announced here is seen as announced by a Reset that follows (both
	// under st.mu), which then resets it on the wire.
	st.mu.Lock()
	if err := st.err; err != nil {
		st.mu.Unlock()
		s.mu.Unlock()
		s.wmu.Unlock()
		return err
	}
	s.nextID += 2
	st.id.Store(id)
	st.synSent.Store(true)
	st.mu.Unlock()
	s.streams[id] = st
	s.own++
	s.mu.Unlock()
	s.appendLocked(muxTypeData, flags, id, uint32(len(payload)), payload)
	s.unlockPending()
	return nil
}

// ownID reports whether id is one this side opens (odd for the client).
func (s *muxSession) ownID(id uint32) bool { return (id%2 == 1) == s.client }

// exhaustLocked marks the ids spent, arming the drain bound once, and
// reports whether nothing this side opened is left (close now). The
// session then reads as exhausted: Conn.IsClosed is true, so no new work
// is routed to it while its streams finish.
func (s *muxSession) exhaustLocked() (drained bool) {
	if !s.exhausted.Load() {
		s.exhausted.Store(true)
		// Owner: the session; closeWith stops it. Fires once.
		s.drainTimer = time.AfterFunc(idsDrainGrace, func() { s.closeWith(ErrStreamIDsExhausted) })
	}
	return s.own == 0
}

// Exhausted reports whether the session can open no more streams.
func (s *muxSession) Exhausted() bool { return s.exhausted.Load() }

// lockPending takes wmu for appending frames. With a waiter, it first
// waits while muxMaxPending bytes are pending, as long as the waiter's
// write deadline allows; it fails when the session is closed.
func (s *muxSession) lockPending(waiter *muxStream) error {
	s.wmu.Lock()
	for waiter != nil && len(s.pending) >= muxMaxPending {
		if s.drained == nil {
			s.drained = make(chan struct{})
		}
		drained := s.drained
		s.wmu.Unlock()
		if err := waiter.waitQueue(drained); err != nil {
			return err
		}
		s.wmu.Lock()
	}
	if s.IsClosed() {
		s.wmu.Unlock()
		return s.streamErr()
	}
	return nil
}

// appendLocked appends one frame to pending; wmu must be held.
func (s *muxSession) appendLocked(typ byte, flags uint16, id, length uint32, payload []byte) {
	var hdr [muxHeaderLen]byte
	putHeader(hdr[:], typ, flags, id, length)
	s.pending = append(append(s.pending, hdr[:]...), payload...)
	s.queued += int64(muxHeaderLen + len(payload))
}

// queuedMark is how many bytes have been queued so far: once written
// reaches it, everything queued before the call is on the wire.
func (s *muxSession) queuedMark() int64 {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.queued
}

// waitWritten blocks until the writer has written mark bytes, the session
// closes or the deadline passes.
func (s *muxSession) waitWritten(mark int64, deadline time.Time) error {
	for {
		if s.written.Load() >= mark {
			return nil
		}
		s.wmu.Lock()
		if s.written.Load() >= mark {
			s.wmu.Unlock()
			return nil
		}
		if s.progress == nil {
			s.progress = make(chan struct{})
		}
		progress := s.progress
		s.wmu.Unlock()
		closed, err := waitSignal(progress, s.done, deadline)
		if closed {
			return s.streamErr()
		}
		if err != nil {
			return err
		}
	}
}

// unlockPending releases wmu and wakes the writer.
func (s *muxSession) unlockPending() {
	s.wmu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// waitSignal blocks until c is signalled, done is closed (closed true) or
// the deadline (zero: none) passes (errTimeout). The session's waits (a
// frame's way onto the wire) are rare, so each makes its own timer; a
// stream's waits use its deadlines' timers (streamDeadline).
func waitSignal(c, done <-chan struct{}, deadline time.Time) (closed bool, err error) {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return false, errTimeout
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-c:
		return false, nil
	case <-done:
		return true, nil
	case <-timeout:
		return false, errTimeout
	}
}

// writeLoop writes whatever frames are pending, all in one write.
func (s *muxSession) writeLoop() {
	for {
		select {
		case <-s.wake:
		case <-s.done:
			return
		}
		// The goroutine that woke the writer runs it next (the scheduler's
		// runnext), ahead of the streams readied in the same batch (by one
		// netpoll wake-up): each of them would then wake the writer again
		// and pay its own write. Yielding once when the batch is small lets
		// them queue first; with nothing else runnable it returns at once.
		// grpc-go's writer does the same.
		s.wmu.Lock()
		if len(s.pending) < muxCoalesceBelow {
			s.wmu.Unlock()
			runtime.Gosched()
			s.wmu.Lock()
		}
		buf := s.takePendingLocked()
		// Read with the batch, under wmu: a test may shorten it for a
		// session already running, taking wmu to do so.
		timeout := muxWriteTimeout
		s.wmu.Unlock()
		if buf == nil {
			continue
		}
		if err := s.writeAll(buf, timeout); err != nil {
			s.closeWith(fmt.Errorf("nodewire: write: %w", err))
			return
		}
		s.written.Add(int64(len(buf)))
		s.wmu.Lock()
		if s.progress != nil {
			close(s.progress)
			s.progress = nil
		}
		if s.keepSpareLocked(len(buf), cap(buf)) {
			s.spare = buf[:0]
		}
		s.wmu.Unlock()
	}
}

// writeAll writes buf to the connection in writes of at most
// muxWriteChunk bytes, each bounded by timeout (muxWriteTimeout): that then
// catches a peer that stopped reading, not one reading steadily on a slow
// link, which a batch's one write under one timeout took for it (a batch
// may hold muxMaxPending of data and control frames besides). A write that
// times out cannot be resumed on a TLS connection: it is broken from then
// on. A batch smaller than a chunk, the usual one, is still one write.
func (s *muxSession) writeAll(buf []byte, timeout time.Duration) error {
	for len(buf) > 0 {
		n := min(len(buf), muxWriteChunk)
		_ = s.conn.SetWriteDeadline(time.Now().Add(timeout))
		if _, err := s.conn.Write(buf[:n]); err != nil {
			return err
		}
		buf = buf[n:]
	}
	return nil
}

// muxSpareKeep is the capacity up to which a written batch's buffer is
// always kept for reuse (takePendingLocked). A larger one, grown by a burst
// (thousands of streams opened at once leave ~400 bytes each), is kept
// while batches still fill a quarter of it, and for muxSpareLinger after
// the last that did: a buffer that goes is grown again, allocation by
// allocation, by the next burst, so a session whose bursts come between a
// few small batches (data frames of many streams, then window updates)
// would otherwise pay that for every burst. Once batches stay small
// longer, the buffer goes with the batch that shows it, so a session whose
// streams are held idle keeps no burst-sized buffers (up to two of 2 MiB)
// for the rest of its life.
const (
	muxSpareKeep   = 64 << 10
	muxSpareLinger = time.Second
)

// keepSpareLocked reports whether the writer keeps a buffer of capacity c,
// just written with a batch of n bytes, for the next batch (wmu held). The
// common small buffer reads no clock.
func (s *muxSession) keepSpareLocked(n, c int) bool {
	if c <= muxSpareKeep {
		return true
	}
	now := time.Now()
	if n >= c/4 {
		s.burstAt = now
	}
	return keepSpare(n, c, now.Sub(s.burstAt))
}

// keepSpare reports whether the writer keeps a buffer of capacity c, just
// written with a batch of n bytes, lull after the last batch that filled a
// quarter of a large buffer (the longest duration when none has).
func keepSpare(n, c int, lull time.Duration) bool {
	return c <= muxSpareKeep || (c <= 2*muxMaxPending && (n >= c/4 || lull < muxSpareLinger))
}

// takePendingLocked hands the writer every pending frame (wmu held) and
// gives appenders the writer's last buffer in its place, so two buffers
// take turns and neither is grown again once both fit a batch. It returns
// nil, swapping nothing, when nothing is pending: a wake-up whose frames an
// earlier batch already took is common (every append signals one), and
// dropping the empty buffer there would have the next batch grow a new one
// from nothing.
func (s *muxSession) takePendingLocked() []byte {
	if s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
	if len(s.pending) == 0 {
		return nil
	}
	buf := s.pending
	s.pending = s.spare[:0]
	s.spare = nil
	return buf
}

// readLoop reads frames until the connection fails or the peer breaks the
// protocol; its result is the session's close cause.
func (s *muxSession) readLoop() error {
	br := bufio.NewReaderSize(s.conn, muxReadBuffer)
	var hdr [muxHeaderLen]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return fmt.Errorf("nodewire: read: %w", err)
		}
		if hdr[0] != muxVersion {
			return fmt.Errorf("%w: multiplexer version %d", ErrProtocol, hdr[0])
		}
		typ, flags := hdr[1], binary.BigEndian.Uint16(hdr[2:4])
		id, length := binary.BigEndian.Uint32(hdr[4:8]), binary.BigEndian.Uint32(hdr[8:12])
		var err error
		switch typ {
		case muxTypeData:
			err = s.readData(br, flags, id, length)
		case muxTypeWindow:
			if st := s.lookup(id); st != nil {
				err = st.grant(length)
			}
		default:
			err = fmt.Errorf("%w: frame type %d", ErrProtocol, typ)
		}
		if err != nil {
			return err
		}
	}
}

func (s *muxSession) lookup(id uint32) *muxStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[id]
}

// readData handles one data frame: it opens the stream on SYN, hands the
// payload over and applies FIN and RST.
func (s *muxSession) readData(br *bufio.Reader, flags uint16, id, length uint32) error {
	if length > muxMaxData {
		return fmt.Errorf("%w: data frame of %d bytes (max %d)", ErrProtocol, length, muxMaxData)
	}
	st, refused, err := s.streamFor(flags, id)
	if err != nil {
		return err
	}
	if refused {
		// Nobody accepts fast enough; the peer learns at once.
		_ = s.enqueue(muxTypeData, flagRST, id, 0, nil, nil)
	}
	payload, err := br.Peek(int(length))
	if err != nil {
		return fmt.Errorf("nodewire: read: %w", err)
	}
	if st != nil {
		if err := st.deliver(payload, flags); err != nil {
			return err
		}
	}
	_, _ = br.Discard(int(length))
	return nil
}

// streamFor finds (or, on SYN, creates) the frame's stream. A nil stream
// with a nil error means the frame is dropped: its stream was already
// forgotten here (reset locally), or it is a new stream refused because
// the accept backlog stayed full for acceptWait (refused is then true and
// the caller resets it).
func (s *muxSession) streamFor(flags uint16, id uint32) (st *muxStream, refused bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The dialing side (client) opens odd ids, the accepting side even ones.
	peerOwns := (id%2 == 0) == s.client
	if flags&flagSYN == 0 {
		st := s.streams[id]
		if st == nil && peerOwns && id > s.maxPeer {
			return nil, false, fmt.Errorf("%w: data for stream %d before it was opened", ErrProtocol, id)
		}
		return st, false, nil
	}
	if !peerOwns || id <= s.maxPeer {
		return nil, false, fmt.Errorf("%w: stream %d opened out of order", ErrProtocol, id)
	}
	s.maxPeer = id
	if s.closeErr != nil {
		return nil, false, nil
	}
	if s.peerOpens >= 0 && s.opened >= s.peerOpens || s.live >= s.maxLive {
		// A stream this side never accepts from this peer, or one too
		// many open at once: reset on arrival, its payload dropped.
		return nil, true, nil
	}
	s.opened++
	s.live++
	st = newMuxStream(s, id)
	st.synSent.Store(true) // the peer opened it: nothing to announce
	s.streams[id] = st
	select {
	case s.accept <- st:
		return st, false, nil
	default:
	}
	// The backlog is full. Wait for room without s.mu: the acceptor and
	// the streams' own calls need it. The stream is registered already,
	// so whatever its acceptor does to it meanwhile (a reset) holds.
	s.mu.Unlock()
	accepted := s.waitAccept(st)
	s.mu.Lock()
	if !accepted {
		if s.streams[id] == st {
			delete(s.streams, id)
			s.live--
		}
		return nil, true, nil
	}
	return st, false, nil
}

// waitAccept hands st to the accept backlog once it has room, waiting at
// most acceptWait; false when it did not, or the session closed first.
func (s *muxSession) waitAccept(st *muxStream) bool {
	t := time.NewTimer(s.acceptWait)
	defer t.Stop()
	select {
	case s.accept <- st:
		return true
	case <-t.C:
		return false
	case <-s.done:
		return false
	}
}

// errTimeout is returned when a deadline passes: the error net
// connections return, so callers test it with errors.Is or net.Error's
// Timeout.
var errTimeout = os.ErrDeadlineExceeded
