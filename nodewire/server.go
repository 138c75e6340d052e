package nodewire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/internal/sockopt"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// ServerHandler is the Edge's side of the lifecycle; the registry implements
// it. Calls for one connection are made in order: Register, then (if
// accepted) Ready and, once its answer was written, Activate; then Closed
// exactly once, even when Register rejected. After Activate, a duplicate
// NodeReadyRequest from the node goes to Ready again (its answer is sent
// back; Activate is not called again).
type ServerHandler interface {
	// Register decides on a registration. It must not block on I/O. The
	// multiplexer of c starts only if it accepts.
	Register(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse
	// Ready answers a NodeReadyRequest from c without acting on it.
	Ready(c *Conn, req *iop.NodeReadyRequest) *iop.NodeReadyResponse
	// Activate makes c's node dispatch-ready: called only after a ready=true
	// answer was written to it. If that write fails, Activate is not called
	// and Closed follows, so nothing was ever dispatched to c.
	Activate(c *Conn)
	// Closed reports that c is gone, and why.
	Closed(c *Conn, err error)
}

// LoadReceiver is implemented by a ServerHandler that takes the load
// reports a ready node sends on its control stream. It must not block on
// I/O: it runs on the connection's control reader.
type LoadReceiver interface {
	Load(c *Conn, r *iop.LoadReport)
}

// ServerConfig configures the Edge's node listener.
type ServerConfig struct {
	// TLS, when non-nil, wraps every accepted connection.
	TLS *tls.Config
	// HandshakeTimeout bounds TLS, preface, registration and the ready
	// exchange's write. Zero means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// ReadyTimeout bounds the time from an accepted registration to the
	// Node's ready request. Zero means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// MaxFrameSize bounds frame payloads. Zero means DefaultMaxFrameSize.
	MaxFrameSize int
	// MaxPendingHandshakes bounds connections that have not finished their
	// registration (TLS, preface, RegisterRequest, the answer); beyond it a
	// new connection is closed at once, unread. At most
	// maxPendingPerSource of them may come from one source address. Zero
	// means DefaultMaxPendingHandshakes; negative means no bound.
	MaxPendingHandshakes int
	// MaxConns bounds node connections of any state; beyond it a new
	// connection is closed at once. Zero means DefaultMaxConns; negative
	// means no bound.
	MaxConns int
	Handler  ServerHandler
	Logger   *zap.Logger
}

// Listener defaults.
const (
	DefaultMaxPendingHandshakes = 64
	DefaultMaxConns             = 1024
	// maxPendingPerSource bounds one source address's share of the pending
	// handshakes, so one host cannot hold them all and lock real nodes out.
	maxPendingPerSource = 8
	// maxRegisterFrame bounds the one frame an unauthenticated peer may
	// send: the RegisterRequest (id, token, version strings).
	maxRegisterFrame = 8 << 10
)

// Server accepts Node connections.
type Server struct {
	cfg ServerConfig
	log *zap.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	ln      net.Listener          // guarded by mu
	conns   map[net.Conn]struct{} // guarded by mu: raw connections being served
	pending int                   // guarded by mu: connections still in the registration
	perSrc  map[string]int        // guarded by mu: pending connections by source address
	// awaiting is guarded by mu: by node id, the connection whose accepted
	// registration waits for its ready request (see awaitReady).
	awaiting map[string]*Conn
	// newest is guarded by mu: by node id, the highest registration order
	// (Conn.SetRegisterOrder) of a connection that has waited for its
	// ready (see awaitReady). An entry lives while its id has a
	// connection in idConns: no more entries than connections served
	// (at most MaxConns), whatever ids came and went.
	newest map[string]uint64
	// idConns is guarded by mu: by node id, the connections whose
	// RegisterRequest reached the handler and that have not ended
	// (holdID, releaseID). newest[id] is needed only while one of them
	// could still reach awaitReady with an older order; once the last
	// ends, any later registration of id is given a newer order, so the
	// entry goes with it. Entries never outnumber the tracked conns.
	idConns map[string]int

	failures *failureDelays // failed-credential delays by node id and source
}

// NewServer returns a server; Serve starts it.
func NewServer(cfg ServerConfig) *Server {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = DefaultMaxFrameSize
	}
	if cfg.MaxPendingHandshakes == 0 {
		cfg.MaxPendingHandshakes = DefaultMaxPendingHandshakes
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{},
		perSrc: map[string]int{}, awaiting: map[string]*Conn{}, newest: map[string]uint64{}, idConns: map[string]int{}, failures: newFailureDelays()}
}

// Serve accepts connections on ln until Close. It returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.ln = ln
	s.mu.Unlock()
	var delay time.Duration
	var lastLog time.Time
	for {
		raw, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("nodewire: accept: %w", err)
			}
			// Anything else — out of descriptors (EMFILE, ENFILE), a
			// connection aborted before it was accepted, a timeout — is
			// a condition of the moment: back off and keep accepting, as
			// net/http does. A listener never dies of load.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			if time.Since(lastLog) >= 5*time.Second {
				lastLog = time.Now()
				s.log.Warn("node listener: accept failed; retrying", zap.Error(err), zap.Duration("backoff", delay))
			}
			select {
			case <-time.After(delay):
			case <-s.ctx.Done():
				return nil
			}
			continue
		}
		delay = 0
		src := sourceOf(raw)
		switch s.track(raw, src) {
		case trackClosed:
			_ = raw.Close()
			return nil
		case trackOverLimit:
			// Closed unread: a flood of connections costs a descriptor
			// for a moment, never a goroutine or a buffer.
			_ = raw.Close()
			continue
		}
		// Owner: the Server (counted in track). Stops when the connection
		// ends; Close ends every tracked connection.
		go func() {
			defer s.wg.Done()
			defer s.untrack(raw)
			s.serveConn(raw, src)
		}()
	}
}

type trackResult int

const (
	trackOK        trackResult = iota
	trackClosed                // the server is closing
	trackOverLimit             // MaxConns or a pending-handshake bound
)

// track registers a new connection as pending, within the bounds.
func (s *Server) track(raw net.Conn, src string) trackResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return trackClosed
	}
	if s.cfg.MaxConns > 0 && len(s.conns) >= s.cfg.MaxConns {
		return trackOverLimit
	}
	if s.cfg.MaxPendingHandshakes > 0 && (s.pending >= s.cfg.MaxPendingHandshakes || s.perSrc[src] >= maxPendingPerSource) {
		return trackOverLimit
	}
	s.conns[raw] = struct{}{}
	s.pending++
	s.perSrc[src]++
	// Counted under mu with the ctx check: a Close that found the server
	// open waits for this connection's goroutine too, never returning
	// between the tracking and the Add.
	s.wg.Add(1)
	return trackOK
}

// registered ends raw's pending state (once; done by serveConn).
func (s *Server) registered(src string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending--
	if s.perSrc[src]--; s.perSrc[src] <= 0 {
		delete(s.perSrc, src)
	}
}

func (s *Server) untrack(raw net.Conn) {
	s.mu.Lock()
	delete(s.conns, raw)
	s.mu.Unlock()
}

// sourceOf is the unit of the per-source bounds (pending handshakes,
// failed-credential delays): the peer's IPv4 address, or the /64 its IPv6
// address is in — one host is commonly given a whole /64 and may use any
// address in it, so counting single IPv6 addresses would let it hold every
// pending place. "" when unknown.
func sourceOf(c net.Conn) string {
	var addr netip.Addr
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		addr = a.AddrPort().Addr()
	} else {
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		var err error
		if addr, err = netip.ParseAddr(host); err != nil {
			return host
		}
	}
	addr = addr.Unmap()
	if addr.Is6() {
		return netip.PrefixFrom(addr.WithZone(""), 64).Masked().String()
	}
	return addr.String()
}

// Close stops accepting, closes every connection and waits for their
// handlers. Idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.cancel()
	if s.ln != nil {
		_ = s.ln.Close()
	}
	for raw := range s.conns {
		_ = raw.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// serveConn runs one connection: the handshake as straight-line code under
// deadlines, then waits for the connection to end.
//
// The peer is authenticated before anything is multiplexed: the preface and
// one bounded RegisterRequest frame are read from the raw connection, the
// answer is written to it, and only an accepted node gets a multiplexer.
// Before that, the edge reads at most len(preface)+4+maxRegisterFrame bytes
// from the peer.
func (s *Server) serveConn(raw net.Conn, src string) {
	log := s.log.With(zap.String("remote", raw.RemoteAddr().String()))
	sockopt.BoundUnsent(raw, wireNotSentLowat) // see muxWriteChunk
	pending := true
	defer func() {
		if pending {
			s.registered(src)
		}
	}()
	deadline := time.Now().Add(s.cfg.HandshakeTimeout)
	raw, req, err := s.readRegister(raw, deadline)
	if err != nil {
		_ = closeNow(raw)
		log.Info("node handshake failed", zap.Error(err))
		return
	}
	c := newConn(raw, s.cfg.MaxFrameSize, s.log)
	c.fanout = maxNodeElements
	// Held before the handler can give c its registration order, so a
	// newer registration's newest entry outlives c (see idConns).
	s.holdID(req.GetNodeId())
	resp := s.cfg.Handler.Register(c, req)
	if resp.GetAccepted() {
		log = log.With(zap.String("node_id", req.GetNodeId()))
	} else {
		// Not a configured id, or one sent without its credentials: the
		// peer's own text, logged only in part.
		log = log.With(zap.String("node_id", LoggableNodeID(req.GetNodeId())))
	}
	ready := false
	defer func() {
		superseded := errors.Is(c.Err(), errSuperseded)
		_ = c.Close()
		// Before Closed: once the handler hears c is gone, nothing of
		// c's is left here.
		s.releaseID(req.GetNodeId())
		cause := c.Err()
		if !ready && !superseded {
			cause = err
		}
		s.cfg.Handler.Closed(c, cause)
	}()

	failKey := newFailureKey(req.GetNodeId(), src)
	if !resp.GetAccepted() {
		switch resp.GetRejectCode() {
		case iop.RejectCode_REJECT_CODE_CREDENTIALS, iop.RejectCode_REJECT_CODE_UNKNOWN_NODE:
			// Slow down guessing, per node id and source: a third party
			// elsewhere never delays the real node.
			// The wait leaves a quarter of the handshake for the answer:
			// a rejection whose write misses the deadline reaches the node
			// as a bare EOF, which it retries as a network failure.
			if d := min(s.failures.fail(failKey), time.Until(deadline)-s.cfg.HandshakeTimeout/4); d > 0 {
				select {
				case <-time.After(d):
				case <-s.ctx.Done():
				}
			}
		}
	} else {
		s.failures.forget(failKey)
	}
	_ = raw.SetWriteDeadline(deadline)
	// A rejection is the close cause even if its write reports an error: the
	// peer may hang up right after reading it.
	serr := WriteFrame(raw, &iop.Envelope{Body: &iop.Envelope_RegisterResponse{RegisterResponse: resp}}, s.cfg.MaxFrameSize)
	if !resp.GetAccepted() {
		err = &RejectedError{Code: resp.GetRejectCode(), Reason: resp.GetReason()}
		log.Info("node registration rejected", zap.Stringer("code", resp.GetRejectCode()), zap.String("reason", resp.GetReason()))
		if serr == nil {
			lingerRaw(raw)
		}
		return
	}
	if err = serr; err != nil {
		log.Info("node handshake failed", zap.Error(err))
		return
	}
	_ = raw.SetDeadline(time.Time{}) // the multiplexer's own deadlines take over
	if err = c.startMux(false); err != nil {
		return
	}
	s.registered(src)
	pending = false
	defer s.awaitReady(req.GetNodeId(), c)()

	// Ready exchange: the Node applies its config first, so this waits up
	// to ReadyTimeout for its control stream and ready request.
	readyBy := time.Now().Add(s.cfg.ReadyTimeout)
	ctx, cancel := context.WithDeadline(s.ctx, readyBy)
	ys, aerr := c.sess.Load().AcceptStreamWithContext(ctx)
	cancel()
	if aerr != nil {
		err = fmt.Errorf("nodewire: waiting for the control stream: %w", aerr)
		log.Info("node handshake failed", zap.Error(err))
		return
	}
	c.ctrl = c.newStream(ys)
	c.streamsAccept.Add(1)
	_ = c.ctrl.SetReadDeadline(readyBy)
	env, rerr := c.ctrl.Recv()
	if rerr != nil {
		err = fmt.Errorf("nodewire: waiting for ready: %w", rerr)
		log.Info("node handshake failed", zap.Error(err))
		return
	}
	rreq := env.GetNodeReadyRequest()
	if rreq == nil {
		err = fmt.Errorf("%w: want NodeReadyRequest, got %T", ErrProtocol, env.Body)
		log.Info("node handshake failed", zap.Error(err))
		return
	}
	// No longer waiting for its ready: from here the handler decides, and
	// a newer registration of the id must not close it as superseded
	// while its answer is written or once it is active.
	s.readyDone(req.GetNodeId(), c)
	rresp := s.cfg.Handler.Ready(c, rreq)
	// Written, not just queued, before the node is activated.
	serr = c.ctrl.SendWritten(&iop.Envelope{Body: &iop.Envelope_NodeReadyResponse{NodeReadyResponse: rresp}}, time.Now().Add(s.cfg.HandshakeTimeout))
	if !rresp.GetReady() { // the cause even if Send reports an error (above)
		err = fmt.Errorf("%w: %s", ErrNotReady, rresp.GetReason())
		if serr == nil {
			c.lingerClose()
		}
		return
	}
	if err = serr; err != nil {
		// Nothing was activated: requests keep waiting for a node that
		// heard its answer.
		log.Info("node handshake failed", zap.Error(err))
		return
	}
	// The answer is out: only now is the node dispatch-ready.
	s.cfg.Handler.Activate(c)
	ready = true
	_ = c.ctrl.SetDeadline(time.Time{})
	c.startHeartbeat(resp.GetConfig().GetHeartbeat(), func(env *iop.Envelope) (*iop.Envelope, bool) {
		// A duplicate ready from the ready owner is answered (ready=true),
		// never treated as a violation.
		if r := env.GetNodeReadyRequest(); r != nil {
			return &iop.Envelope{Body: &iop.Envelope_NodeReadyResponse{NodeReadyResponse: s.cfg.Handler.Ready(c, r)}}, true
		}
		if r := env.GetLoadReport(); r != nil {
			if lr, ok := s.cfg.Handler.(LoadReceiver); ok {
				lr.Load(c, r)
			}
			return nil, true
		}
		return nil, false
	})
	select {
	case <-c.Done():
	case <-s.ctx.Done():
	}
}

// errSuperseded is the close cause of a connection that was still waiting
// for its ready when a newer registration of its node id was accepted.
var errSuperseded = fmt.Errorf("%w: superseded by a newer registration of its node id", ErrClosed)

// awaitReady records c as the connection of id that waits for its ready,
// closing an older one still waiting: it could only be refused as stale
// now, and would otherwise hold its place in MaxConns for ReadyTimeout,
// so whoever holds one node's token could fill MaxConns by registering
// again and again. (A ready connection is the handler's to supersede.)
// Older is by registration order (Conn.SetRegisterOrder), not by when the
// answers' writes ended: when the one waiting was registered after c, c is
// the stale one and is closed instead, so the handler's owner is kept.
// So is c when a connection registered after it has already waited for
// its ready, whether that one is ready now, failed or gone: its answer
// went out late, and the handler superseded it when the newer one
// registered. Without an order (0) the newest arrival is kept.
// The returned func forgets c, if it is still the one recorded.
func (s *Server) awaitReady(id string, c *Conn) func() {
	order := c.registerOrder.Load()
	s.mu.Lock()
	stale := s.awaiting[id]
	if order != 0 && order < s.newest[id] || stale != nil && stale.registerOrder.Load() > order {
		stale = c
	} else {
		s.awaiting[id] = c
		s.newest[id] = max(s.newest[id], order)
	}
	s.mu.Unlock()
	if stale != nil {
		stale.closeWith(errSuperseded) // wakes its serveConn; never waits
	}
	return func() { s.readyDone(id, c) }
}

// holdID counts a connection of id whose registration reaches the handler.
func (s *Server) holdID(id string) {
	s.mu.Lock()
	s.idConns[id]++
	s.mu.Unlock()
}

// releaseID ends what holdID began; with id's last connection gone, its
// newest entry goes too: every later registration of id is newer.
func (s *Server) releaseID(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idConns[id]--; s.idConns[id] <= 0 {
		delete(s.idConns, id)
		delete(s.newest, id)
	}
}

// readyDone forgets c as id's connection waiting for its ready.
func (s *Server) readyDone(id string, c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.awaiting[id] == c {
		delete(s.awaiting, id)
	}
}

// readRegister performs TLS and reads the preface and the RegisterRequest
// from the raw connection, all before deadline, reading at most
// len(preface)+4+maxRegisterFrame bytes. It returns the connection to use
// (TLS-wrapped when configured).
func (s *Server) readRegister(raw net.Conn, deadline time.Time) (net.Conn, *iop.RegisterRequest, error) {
	_ = raw.SetDeadline(deadline)
	if s.cfg.TLS != nil {
		tc := tls.Server(raw, s.cfg.TLS)
		if err := tc.HandshakeContext(s.ctx); err != nil {
			return raw, nil, fmt.Errorf("nodewire: tls: %w", err)
		}
		raw = tc
	}
	var got [len(preface)]byte
	if _, err := io.ReadFull(raw, got[:]); err != nil {
		return raw, nil, fmt.Errorf("nodewire: read preface: %w", err)
	}
	if got != preface {
		return raw, nil, ErrBadPreface
	}
	env, err := ReadFrame(raw, maxRegisterFrame)
	if err != nil {
		return raw, nil, fmt.Errorf("nodewire: read register: %w", err)
	}
	req := env.GetRegisterRequest()
	if req == nil {
		return raw, nil, fmt.Errorf("%w: want RegisterRequest, got %T", ErrProtocol, env.Body)
	}
	return raw, req, nil
}

// lingerRaw half-closes a connection after a final answer (a rejection)
// and waits briefly for the peer to hang up, so the answer reaches it
// before the socket closes. It reads (and drops) at most a few KiB.
func lingerRaw(raw net.Conn) {
	if cw, ok := raw.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = raw.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, _ = io.CopyN(io.Discard, raw, maxRegisterFrame)
}

// lingerClose half-closes the control stream and waits briefly for the peer
// to hang up, so a final answer (ready=false) reaches it before the socket
// closes.
func (c *Conn) lingerClose() {
	_ = c.ctrl.CloseWrite()
	_ = c.ctrl.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		if _, err := c.ctrl.Recv(); err != nil {
			return
		}
	}
}
