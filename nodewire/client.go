package nodewire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/internal/sockopt"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// DialConfig configures the Node's connection to the Edge.
type DialConfig struct {
	// Address is the Edge's node listener, host:port.
	Address string
	// TLS, when non-nil, is used for the connection (NewClientTLS).
	TLS *ClientTLS
	// ServerName is the name TLS verifies when NewClientTLS was given
	// none: the name Address was resolved from, when it is an address.
	// Empty means the host part of Address, as crypto/tls.Dial verifies.
	ServerName string
	// HandshakeTimeout bounds dial, TLS, registration and the ready
	// exchange. Zero means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxFrameSize bounds frame payloads. Zero means DefaultMaxFrameSize.
	MaxFrameSize int
	// LocalAddr, when set, is the local IP address to dial from (a host
	// with several addresses); empty lets the system choose.
	LocalAddr string
	Logger    *zap.Logger
}

// ClientConn is the Node's side of a connection.
type ClientConn struct {
	*Conn
	cfg      DialConfig
	register *iop.RegisterResponse
}

// Dial connects to the Edge and registers. On a refused registration it
// returns a *RejectedError (check Fatal) and no connection. On success the
// Node holds only pending ownership: it must apply resp.Config and call
// Ready before anything is dispatched to it.
func Dial(ctx context.Context, cfg DialConfig, req *iop.RegisterRequest) (*ClientConn, *iop.RegisterResponse, error) {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = DefaultMaxFrameSize
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()

	var d net.Dialer
	if cfg.LocalAddr != "" {
		ip := net.ParseIP(cfg.LocalAddr)
		if ip == nil {
			return nil, nil, fmt.Errorf("nodewire: local address %q is not an IP address", cfg.LocalAddr)
		}
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	raw, err := d.DialContext(ctx, "tcp", cfg.Address)
	if err != nil {
		return nil, nil, fmt.Errorf("nodewire: dial: %w", err)
	}
	sockopt.BoundUnsent(raw, wireNotSentLowat) // see muxWriteChunk
	// Closing the socket when ctx ends bounds every blocking step below,
	// including the multiplexer's stream reads, by the handshake deadline.
	// The callback closes its own copy: raw is reassigned below (TLS).
	sock := raw
	stop := context.AfterFunc(ctx, func() { _ = sock.Close() })
	ok := false
	defer func() {
		if !stop() || !ok {
			_ = raw.Close()
		}
	}()
	_ = raw.SetDeadline(deadline)
	if cfg.TLS != nil {
		name := cfg.ServerName
		if name == "" {
			name, _, _ = net.SplitHostPort(cfg.Address)
		}
		tcfg := cfg.TLS.config(name)
		tc := tls.Client(raw, tcfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, nil, fmt.Errorf("nodewire: tls: %w", err)
		}
		raw = tc
	}
	// Preface and registration leave in one write, on the raw connection:
	// the Edge authenticates before anything is multiplexed.
	if req.ProtocolVersion == 0 {
		req.ProtocolVersion = ProtocolVersion
	}
	hello, err := AppendFrame(append([]byte(nil), preface[:]...), &iop.Envelope{Body: &iop.Envelope_RegisterRequest{RegisterRequest: req}}, maxRegisterFrame)
	if err != nil {
		return nil, nil, fmt.Errorf("nodewire: register: %w", err)
	}
	if _, err := raw.Write(hello); err != nil {
		return nil, nil, fmt.Errorf("nodewire: send register: %w", ctxErr(ctx, err))
	}
	env, err := ReadFrame(raw, cfg.MaxFrameSize)
	if err != nil {
		return nil, nil, fmt.Errorf("nodewire: read register response: %w", ctxErr(ctx, err))
	}
	resp := env.GetRegisterResponse()
	if resp == nil {
		return nil, nil, fmt.Errorf("%w: want RegisterResponse, got %T", ErrProtocol, env.Body)
	}
	if !resp.GetAccepted() {
		return nil, nil, &RejectedError{Code: resp.GetRejectCode(), Reason: boundReason(resp.GetReason())}
	}
	_ = raw.SetDeadline(time.Time{})
	c := newConn(raw, cfg.MaxFrameSize, cfg.Logger)
	if err := c.startMux(true); err != nil {
		return nil, nil, err
	}
	ys, err := c.sess.Load().OpenStream()
	if err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("nodewire: open control stream: %w", err)
	}
	c.ctrl = newStream(ys, cfg.MaxFrameSize)
	ok = true
	return &ClientConn{Conn: c, cfg: cfg, register: resp}, resp, nil
}

func ctxErr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if d, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(d) {
		// The stream deadline, set from ctx's, fired before ctx's own timer.
		cerr = context.DeadlineExceeded
	}
	if cerr != nil {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	return err
}

// Ready reports readiness and waits for the answer. ErrNotReady means the
// Edge refused (stale or superseded connection): close and redial. On
// success heartbeats start.
func (c *ClientConn) Ready(ctx context.Context, nodeID string) error {
	return c.ReadyWith(ctx, &iop.NodeReadyRequest{NodeId: nodeID})
}

// ReadyWith is Ready with the whole request (the adapters' capabilities).
func (c *ClientConn) ReadyWith(ctx context.Context, req *iop.NodeReadyRequest) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HandshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.closeWith(fmt.Errorf("nodewire: ready: %w", ctx.Err())) })
	defer stop()
	deadline, _ := ctx.Deadline()
	_ = c.ctrl.SetDeadline(deadline)
	// A failed exchange leaves the control stream unusable: close. (The
	// AfterFunc alone does not suffice: the stream deadline can fire first
	// and stop below then wins over ctx's timer.)
	if err := c.ctrl.Send(&iop.Envelope{Body: &iop.Envelope_NodeReadyRequest{NodeReadyRequest: req}}); err != nil {
		err = fmt.Errorf("nodewire: send ready: %w", ctxErr(ctx, err))
		c.closeWith(err)
		return err
	}
	env, err := c.ctrl.Recv()
	if err != nil {
		err = fmt.Errorf("nodewire: read ready response: %w", ctxErr(ctx, err))
		c.closeWith(err)
		return err
	}
	resp := env.GetNodeReadyResponse()
	if resp == nil {
		return fmt.Errorf("%w: want NodeReadyResponse, got %T", ErrProtocol, env.Body)
	}
	if !resp.GetReady() {
		return fmt.Errorf("%w: %s", ErrNotReady, resp.GetReason())
	}
	_ = c.ctrl.SetDeadline(time.Time{})
	c.startHeartbeat(c.register.GetConfig().GetHeartbeat(), func(env *iop.Envelope) (*iop.Envelope, bool) {
		// The answer to a repeated ready (ReadyAgain): still ours, or the
		// edge no longer counts this connection.
		if r := env.GetNodeReadyResponse(); r != nil {
			return nil, r.GetReady()
		}
		return nil, false
	})
	return nil
}

// SendLoad sends a load report on the control stream, bounded by deadline
// (the edge may be slow to read; a report is worth nothing late). A
// deadline that passes leaves the connection as it was, unless it cut the
// report mid-frame (ErrStreamCut): the control stream is then unusable and
// the connection is closed.
func (c *ClientConn) SendLoad(r *iop.LoadReport, deadline time.Time) error {
	if err := c.ctrl.SendWritten(&iop.Envelope{Body: &iop.Envelope_LoadReport{LoadReport: r}}, deadline); err != nil {
		err = fmt.Errorf("nodewire: load report: %w", err)
		if errors.Is(err, ErrStreamCut) {
			c.closeWith(err)
		}
		return err
	}
	return nil
}

// ReadyAgain repeats the ready request on an established connection (the
// seed allows it: the ready owner is answered ready=true and keeps its
// session). The answer is read by the heartbeat receiver; a refusal closes
// the connection.
func (c *ClientConn) ReadyAgain(nodeID string) error {
	ready := &iop.Envelope{Body: &iop.Envelope_NodeReadyRequest{NodeReadyRequest: &iop.NodeReadyRequest{NodeId: nodeID}}}
	if err := c.ctrl.SendBy(ready, time.Now().Add(c.cfg.HandshakeTimeout)); err != nil {
		return fmt.Errorf("nodewire: send ready: %w", err)
	}
	return nil
}

// StreamHandler serves one Edge-opened stream whose first envelope is
// first. ctx is cancelled when the connection closes. The handler owns st
// and must CloseWrite it when done.
type StreamHandler func(ctx context.Context, st *Stream, first *iop.Envelope)

// Serve accepts Edge-opened streams and runs h for each on a goroutine of
// its own (reused from an earlier stream when one waits, see workers.go),
// until the connection closes or ctx is cancelled. At most
// maxServeHandlers run at once: a stream opened while that many run is
// reset at once. It returns the connection's close cause after every
// handler has returned.
func (c *ClientConn) Serve(ctx context.Context, h StreamHandler) error {
	callerCtx := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.closeWith(fmt.Errorf("nodewire: serve: %w", context.Cause(ctx))) })
	defer stop()
	go func() {
		// Owner: Serve. Stops when the connection closes; it cancels the
		// handlers' context so they wind down.
		select {
		case <-c.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	workers := newWorkerPool(ctx, &wg, func(st *Stream) {
		first, err := recvFirst(st, c.cfg.HandshakeTimeout) // see firstframe.go
		if err != nil {
			st.Abort()
			return
		}
		_ = st.SetReadDeadline(time.Time{})
		h(ctx, st, first)
	})
	for {
		st, err := c.acceptStream(ctx)
		if err != nil {
			// Serve's own cancel below is not a close cause. The AfterFunc
			// may not have run yet for the caller's cancel (stop can win
			// the race with the cancel's propagation): close here.
			stop()
			if cause := context.Cause(callerCtx); cause != nil {
				c.closeWith(fmt.Errorf("nodewire: serve: %w", cause))
			}
			cancel()
			wg.Wait()
			if c.IsClosed() {
				<-c.closed // the session watcher records why it ended
			}
			if cerr := c.Err(); cerr != nil {
				return cerr
			}
			return err
		}
		workers.serve(st) // see workers.go
	}
}
