package nodewire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// ServerHandler is the Edge's side of the lifecycle; the registry implements
// it. Calls for one connection are made in order: Register, then (if
// accepted) Ready, then Closed exactly once, even when Register rejected.
type ServerHandler interface {
	// Register decides on a registration. It must not block on I/O.
	Register(c *Conn, req *iop.RegisterRequest) *iop.RegisterResponse
	// Ready answers a NodeReadyRequest from c.
	Ready(c *Conn, req *iop.NodeReadyRequest) *iop.NodeReadyResponse
	// Closed reports that c is gone, and why.
	Closed(c *Conn, err error)
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
	Handler      ServerHandler
	Logger       *zap.Logger
}

// Server accepts Node connections.
type Server struct {
	cfg ServerConfig
	log *zap.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	ln    net.Listener          // guarded by mu
	conns map[net.Conn]struct{} // guarded by mu: raw connections being served
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
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
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
		if !s.track(raw) {
			_ = raw.Close()
			return nil
		}
		s.wg.Add(1)
		// Owner: the Server. Stops when the connection ends; Close ends every
		// tracked connection.
		go func() {
			defer s.wg.Done()
			defer s.untrack(raw)
			s.serveConn(raw)
		}()
	}
}

func (s *Server) track(raw net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	s.conns[raw] = struct{}{}
	return true
}

func (s *Server) untrack(raw net.Conn) {
	s.mu.Lock()
	delete(s.conns, raw)
	s.mu.Unlock()
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
func (s *Server) serveConn(raw net.Conn) {
	log := s.log.With(zap.String("remote", raw.RemoteAddr().String()))
	c, req, err := s.handshakeRegister(raw)
	if err != nil {
		if c != nil {
			_ = c.Close()
		} else {
			_ = raw.Close()
		}
		log.Info("node handshake failed", zap.Error(err))
		return
	}
	log = log.With(zap.String("node_id", req.GetNodeId()))

	resp := s.cfg.Handler.Register(c, req)
	ready := false
	defer func() {
		_ = c.Close()
		cause := c.Err()
		if !ready {
			cause = err
		}
		s.cfg.Handler.Closed(c, cause)
	}()

	deadline := time.Now().Add(s.cfg.HandshakeTimeout)
	_ = c.ctrl.SetWriteDeadline(deadline)
	// A rejection is the close cause even if its Send reports an error: the
	// peer may hang up right after reading it.
	serr := c.ctrl.Send(&iop.Envelope{Body: &iop.Envelope_RegisterResponse{RegisterResponse: resp}})
	if !resp.GetAccepted() {
		err = &RejectedError{Code: resp.GetRejectCode(), Reason: resp.GetReason()}
		log.Info("node registration rejected", zap.Stringer("code", resp.GetRejectCode()), zap.String("reason", resp.GetReason()))
		if serr == nil {
			c.lingerClose()
		}
		return
	}
	if err = serr; err != nil {
		log.Info("node handshake failed", zap.Error(err))
		return
	}

	// Ready exchange: the Node applies its config first, so this waits up
	// to ReadyTimeout.
	_ = c.ctrl.SetReadDeadline(time.Now().Add(s.cfg.ReadyTimeout))
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
	rresp := s.cfg.Handler.Ready(c, rreq)
	_ = c.ctrl.SetWriteDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	serr = c.ctrl.Send(&iop.Envelope{Body: &iop.Envelope_NodeReadyResponse{NodeReadyResponse: rresp}})
	if !rresp.GetReady() { // the cause even if Send reports an error (above)
		err = fmt.Errorf("%w: %s", ErrNotReady, rresp.GetReason())
		if serr == nil {
			c.lingerClose()
		}
		return
	}
	if err = serr; err != nil {
		log.Info("node handshake failed", zap.Error(err))
		return
	}
	ready = true
	_ = c.ctrl.SetDeadline(time.Time{})
	c.startHeartbeat(resp.GetConfig().GetHeartbeat())
	select {
	case <-c.Done():
	case <-s.ctx.Done():
	}
}

// handshakeRegister performs TLS, the preface, the multiplexer start and
// reads the RegisterRequest, all under HandshakeTimeout. It returns a Conn
// whenever the multiplexer started, so the caller can close it.
func (s *Server) handshakeRegister(raw net.Conn) (*Conn, *iop.RegisterRequest, error) {
	deadline := time.Now().Add(s.cfg.HandshakeTimeout)
	_ = raw.SetDeadline(deadline)
	if s.cfg.TLS != nil {
		tc := tls.Server(raw, s.cfg.TLS)
		if err := tc.HandshakeContext(s.ctx); err != nil {
			return nil, nil, fmt.Errorf("nodewire: tls: %w", err)
		}
		raw = tc
	}
	var got [len(preface)]byte
	if _, err := io.ReadFull(raw, got[:]); err != nil {
		return nil, nil, fmt.Errorf("nodewire: read preface: %w", err)
	}
	if got != preface {
		return nil, nil, ErrBadPreface
	}
	_ = raw.SetDeadline(time.Time{}) // the multiplexer's own deadlines take over
	sess := muxServer(raw)
	ctx, cancel := context.WithDeadline(s.ctx, deadline)
	defer cancel()
	ys, err := sess.AcceptStreamWithContext(ctx)
	if err != nil {
		_ = sess.Close()
		return nil, nil, fmt.Errorf("nodewire: accept control stream: %w", err)
	}
	c := newConn(raw, sess, ys, s.cfg.MaxFrameSize, s.log)
	_ = c.ctrl.SetReadDeadline(deadline)
	env, err := c.ctrl.Recv()
	if err != nil {
		return c, nil, fmt.Errorf("nodewire: read register: %w", err)
	}
	req := env.GetRegisterRequest()
	if req == nil {
		return c, nil, fmt.Errorf("%w: want RegisterRequest, got %T", ErrProtocol, env.Body)
	}
	return c, req, nil
}

// lingerClose half-closes the control stream and waits briefly for the peer
// to hang up, so a final answer (a rejection, ready=false) reaches it before
// the socket closes.
func (c *Conn) lingerClose() {
	_ = c.ctrl.CloseWrite()
	_ = c.ctrl.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		if _, err := c.ctrl.Recv(); err != nil {
			return
		}
	}
}
