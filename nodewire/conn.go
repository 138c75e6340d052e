package nodewire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// preface is the first thing a Node writes on a new connection, so an Edge
// drops non-iop peers at once. Its last byte is the wire version: 2 is
// "registration on the raw connection, then the multiplexer" (handshake.go);
// a peer speaking another version is refused before it sends anything else.
var preface = [8]byte{'I', 'O', 'P', 'W', 'I', 'R', 'E', wireVersion}

// wireVersion is the preface's last byte (see preface).
const wireVersion = 2

// Default timings. Heartbeat values normally come from the Edge config in
// RegisterResponse; these apply when a payload leaves them zero.
const (
	DefaultHandshakeTimeout  = 10 * time.Second
	DefaultReadyTimeout      = 60 * time.Second
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultHeartbeatTimeout  = 15 * time.Second
)

// Conn is one Edge-Node connection: the multiplexed session, its control
// stream and its heartbeats. The multiplexer owns the socket's one reader and
// one writer goroutine; Conn adds the heartbeat sender and receiver on the
// control stream.
//
// A Conn exists from the registration on, before the multiplexer starts
// (the Edge authenticates a Node on the raw connection and multiplexes only
// an accepted one): sess is set once, by startMux.
type Conn struct {
	raw      net.Conn
	sess     atomic.Pointer[muxSession] // nil until startMux
	ctrl     *Stream                    // set with sess, before any other goroutine uses it
	maxFrame int
	// fanout bounds what one received frame may decode into (see
	// checkFanout): maxNodeElements on the edge, whose peers are nodes;
	// 0 (no bound) on the node, which decodes what the edge validated.
	// Set before the first stream.
	fanout int
	log    *zap.Logger

	closed    chan struct{} // closed once, by closeWith
	closeOnce sync.Once
	errMu     sync.Mutex
	err       error // guarded by errMu: the first close cause

	hbOnce sync.Once
	wg     sync.WaitGroup // heartbeat and session-watch goroutines

	connectedAt    time.Time
	streamsOpened  atomic.Int64
	streamsAccept  atomic.Int64
	heartbeatsSent atomic.Uint64
	heartbeatsRecv atomic.Uint64
	lastRecvNano   atomic.Int64
	// registerOrder is the place of c's accepted registration among all
	// the handler accepted (SetRegisterOrder); 0 when it gives none.
	registerOrder atomic.Uint64
}

func newConn(raw net.Conn, maxFrame int, log *zap.Logger) *Conn {
	c := &Conn{
		raw:         raw,
		maxFrame:    maxFrame,
		log:         log,
		closed:      make(chan struct{}),
		connectedAt: time.Now(),
	}
	c.lastRecvNano.Store(time.Now().UnixNano())
	return c
}

// startMux starts the multiplexer on the connection (client: the dialing
// side). It fails when the Conn was closed meanwhile (a newer registration
// of the same node superseded it during the handshake).
func (c *Conn) startMux(client bool) error {
	c.errMu.Lock()
	if c.err != nil {
		c.errMu.Unlock()
		return ErrClosed
	}
	var sess *muxSession
	if client {
		sess = muxClient(c.raw)
	} else {
		// The edge: a node opens only its control stream.
		sess = newMuxSession(c.raw, false, 1)
	}
	c.sess.Store(sess)
	// Counted before errMu is released: a Close that finds the session
	// (closeWith reads it under errMu) then waits for this goroutine too.
	c.wg.Add(1)
	c.errMu.Unlock()
	// Owner: the Conn. Stops when the session dies (socket error, peer
	// close) or the Conn is closed.
	go func() {
		defer c.wg.Done()
		select {
		case <-sess.CloseChan():
			// The session's own cause (a protocol violation, a peer that
			// stopped reading, the peer's hang-up as io.EOF), set before
			// it signals closed.
			c.closeWith(fmt.Errorf("nodewire: session ended: %w", sess.err()))
		case <-c.closed:
		}
	}()
	return nil
}

// SetRegisterOrder records the place of c's accepted registration among
// all the handler accepted (larger: later), decided in the handler's own
// step that made c its node's owner. The server's answer writes may end in
// another order than those steps; a connection waiting for its ready is
// then superseded only by a later registration (awaitReady), never by an
// earlier one whose answer went out last; and one whose answer goes out
// after a later registration's connection has already waited for its
// ready is closed at once. So the order must only grow for the server's
// life, across node ids.
func (c *Conn) SetRegisterOrder(n uint64) { c.registerOrder.Store(n) }

// RegisterOrder is what SetRegisterOrder recorded (0: nothing).
func (c *Conn) RegisterOrder() uint64 { return c.registerOrder.Load() }

// RemoteAddr is the peer address, for logs only (never shown in status).
func (c *Conn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

// Done is closed when the connection is closed for any reason.
func (c *Conn) Done() <-chan struct{} { return c.closed }

// IsClosed reports whether the connection is closed or closing. It turns
// true before any stream on the connection fails, so callers can tell a
// stream error caused by the connection going away. A connection whose
// stream ids are spent (ErrStreamIDsExhausted) is closing: it opens no
// more streams and closes once those it opened end.
func (c *Conn) IsClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		sess := c.sess.Load()
		return sess != nil && (sess.IsClosed() || sess.Exhausted())
	}
}

// Err is why the connection closed: ErrHeartbeatTimeout, ErrClosed (local
// Close), or a wrapped I/O error. Nil while open.
func (c *Conn) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// closeWith closes the connection recording err as the cause, without
// waiting for goroutines (it is called from them). A session that ended
// already is the cause instead, whoever calls first: the goroutines that
// see its streams fail race its watcher here, and the heartbeat receiver
// would take a write that timed out (a peer that stopped reading) for its
// own read deadline (ErrHeartbeatTimeout).
func (c *Conn) closeWith(err error) {
	c.closeOnce.Do(func() {
		c.errMu.Lock()
		sess := c.sess.Load()
		if sess != nil && sess.IsClosed() {
			err = fmt.Errorf("nodewire: session ended: %w", sess.err())
		}
		c.err = err
		c.errMu.Unlock()
		close(c.closed)
		if sess != nil {
			_ = sess.Close()
		}
		_ = closeNow(c.raw)
	})
}

// closeNow closes conn without waiting on the peer. A TLS connection's
// Close first writes a close_notify alert, which waits up to 5 s (its own
// bound) for a peer that does not read: the very peer a write timeout or a
// heartbeat timeout is closing. The socket beneath is closed first
// instead, so the alert fails at once. The peer reads io.EOF either way
// (crypto/tls takes a close at a record boundary without the alert as
// one), and the wire needs no alert: its streams end with FIN or RST.
func closeNow(conn net.Conn) error {
	if tc, ok := conn.(*tls.Conn); ok {
		_ = tc.NetConn().Close()
	}
	return conn.Close()
}

// Close closes the connection and waits for its goroutines. Idempotent.
// A session that ended already (its watcher may not have run yet) is the
// cause, not this Close (closeWith): the peer's protocol violation stays
// one.
func (c *Conn) Close() error {
	c.closeWith(ErrClosed)
	c.wg.Wait()
	return nil
}

// OpenStream opens a new stream to the peer.
func (c *Conn) OpenStream(ctx context.Context) (*Stream, error) {
	select {
	case <-c.closed:
		return nil, ErrClosed
	default:
	}
	sess := c.sess.Load()
	if sess == nil {
		return nil, fmt.Errorf("nodewire: open stream: %w", ErrClosed)
	}
	s, err := sess.OpenStream()
	if err != nil {
		if sess.IsClosed() {
			return nil, fmt.Errorf("nodewire: open stream: %w", ErrClosed)
		}
		return nil, fmt.Errorf("nodewire: open stream: %w", err)
	}
	c.streamsOpened.Add(1)
	return c.newStream(s), nil
}

// newStream wraps a mux stream of c with c's frame limits.
func (c *Conn) newStream(s *muxStream) *Stream {
	st := newStream(s, c.maxFrame)
	st.fanout = c.fanout
	return st
}

// acceptStream waits for the peer's next stream.
func (c *Conn) acceptStream(ctx context.Context) (*Stream, error) {
	sess := c.sess.Load()
	if sess == nil {
		return nil, ErrClosed
	}
	s, err := sess.AcceptStreamWithContext(ctx)
	if err != nil {
		if sess.IsClosed() {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("nodewire: accept stream: %w", err)
	}
	c.streamsAccept.Add(1)
	return c.newStream(s), nil
}

// startHeartbeat runs the control stream after the handshake: one goroutine
// sends a Heartbeat every interval, one reads the peer's and closes the
// connection with ErrHeartbeatTimeout when nothing arrives for timeout.
// Any other control message goes to onControl: ok false (or a nil
// onControl) makes it a protocol violation; a non-nil answer is sent back.
func (c *Conn) startHeartbeat(hb *iop.HeartbeatConfig, onControl func(*iop.Envelope) (answer *iop.Envelope, ok bool)) {
	interval, timeout := heartbeatDurations(hb)
	c.hbOnce.Do(func() {
		// Counted under errMu, as in startMux: a Close (which records its
		// cause under errMu, then waits) either sees these goroutines or
		// they are never started.
		c.errMu.Lock()
		if c.err != nil {
			c.errMu.Unlock()
			return
		}
		c.wg.Add(2)
		c.errMu.Unlock()
		// Owner: the Conn. Stops when the Conn closes or a send fails.
		go func() {
			defer c.wg.Done()
			c.sendHeartbeats(interval, timeout)
		}()
		// Owner: the Conn. Stops on the heartbeat timeout, any read error,
		// or a protocol violation; each of those closes the Conn.
		go func() {
			defer c.wg.Done()
			c.recvHeartbeats(timeout, onControl)
		}()
	})
}

func heartbeatDurations(hb *iop.HeartbeatConfig) (interval, timeout time.Duration) {
	interval = time.Duration(hb.GetIntervalMs()) * time.Millisecond
	timeout = time.Duration(hb.GetTimeoutMs()) * time.Millisecond
	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	if timeout <= interval {
		timeout = 3 * interval
	}
	return interval, timeout
}

func (c *Conn) sendHeartbeats(interval, timeout time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var seq uint64
	for {
		seq++
		err := c.ctrl.SendBy(&iop.Envelope{Body: &iop.Envelope_Heartbeat{Heartbeat: &iop.Heartbeat{
			Sequence: seq, SentUnixNano: time.Now().UnixNano(),
		}}}, time.Now().Add(timeout))
		if err != nil {
			c.closeWith(fmt.Errorf("nodewire: send heartbeat: %w", err))
			return
		}
		c.heartbeatsSent.Add(1)
		select {
		case <-t.C:
		case <-c.closed:
			return
		}
	}
}

func (c *Conn) recvHeartbeats(timeout time.Duration, onControl func(*iop.Envelope) (*iop.Envelope, bool)) {
	for {
		_ = c.ctrl.SetReadDeadline(time.Now().Add(timeout))
		env, err := c.ctrl.Recv()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.closeWith(ErrHeartbeatTimeout)
			} else {
				c.closeWith(fmt.Errorf("nodewire: control stream: %w", err))
			}
			return
		}
		if env.GetHeartbeat() == nil {
			var answer *iop.Envelope
			ok := false
			if onControl != nil {
				answer, ok = onControl(env)
			}
			if !ok {
				c.closeWith(fmt.Errorf("%w: %T on control stream after handshake", ErrProtocol, env.Body))
				return
			}
			if answer != nil {
				if err := c.ctrl.SendBy(answer, time.Now().Add(timeout)); err != nil {
					c.closeWith(fmt.Errorf("nodewire: control answer: %w", err))
					return
				}
			}
			c.lastRecvNano.Store(time.Now().UnixNano())
			continue
		}
		c.heartbeatsRecv.Add(1)
		c.lastRecvNano.Store(time.Now().UnixNano())
	}
}

// Stats is a connection's transport state for the `transport` command.
type Stats struct {
	ConnectedAt        time.Time `json:"connected_at"`
	StreamsOpen        int       `json:"streams_open"`
	StreamsOpened      int64     `json:"streams_opened"`
	StreamsAccepted    int64     `json:"streams_accepted"`
	HeartbeatsSent     uint64    `json:"heartbeats_sent"`
	HeartbeatsReceived uint64    `json:"heartbeats_received"`
	LastReceived       time.Time `json:"last_heartbeat_received"`
}

func (c *Conn) numStreams() int {
	if sess := c.sess.Load(); sess != nil {
		return sess.NumStreams()
	}
	return 0
}

// Stats reports transport counters.
func (c *Conn) Stats() Stats {
	return Stats{
		ConnectedAt:        c.connectedAt,
		StreamsOpen:        c.numStreams(),
		StreamsOpened:      c.streamsOpened.Load(),
		StreamsAccepted:    c.streamsAccept.Load(),
		HeartbeatsSent:     c.heartbeatsSent.Load(),
		HeartbeatsReceived: c.heartbeatsRecv.Load(),
		LastReceived:       time.Unix(0, c.lastRecvNano.Load()),
	}
}
