package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Supervisor errors that end the process with exit code 1.
var (
	// ErrFatal wraps non-retryable failures: the Edge rejected the Node's
	// credentials, identity or protocol version.
	ErrFatal = errors.New("nodeagent: fatal")
	// ErrAttemptsExhausted is returned when a finite reconnect budget ran out.
	ErrAttemptsExhausted = errors.New("nodeagent: reconnect attempts exhausted")
)

// SupervisorConfig is the one connect policy, for the initial connect and
// every reconnect alike.
type SupervisorConfig struct {
	Dial    nodewire.DialConfig
	NodeID  string
	Token   string
	Version string
	// Interval between a failed attempt (or a lost session) and the next
	// attempt. Must be > 0.
	Interval time.Duration
	// MaxAttempts is the number of consecutive failed attempts after which
	// Run gives up; 0 means unlimited until ctx is cancelled. The count
	// resets only when a session reaches ready.
	MaxAttempts int
}

// Supervisor owns the Node's connection: one goroutine (the caller of Run)
// dials, registers, applies the config, reports ready and serves, then
// reconnects, serially.
type Supervisor struct {
	cfg   SupervisorConfig
	agent *Agent
	log   *zap.Logger
	// onState, when set, observes attempts (tests); it must not block.
	onState func(state string, attempt int, err error)
	// watch, when set, shares this supervisor's attempt count with the
	// other addresses of its DNS name and may end Run between attempts
	// (RunEdges' nameFollower); nil for an address of its own.
	watch sessionWatch
}

// A sessionWatch follows one supervisor's sessions. Its methods are called
// from Run's goroutine and must not block.
type sessionWatch interface {
	// ready: a session reached ready.
	ready()
	// lost: that ready session ended.
	lost()
	// failed: an attempt failed before ready (own is this supervisor's
	// own consecutive count). It returns the count to report and whether
	// the budget is spent, which replace the supervisor's own.
	failed(own int) (attempts int, exhausted bool)
	// next is asked before each reconnect: false ends Run with nil.
	next() bool
}

// NewSupervisor returns a supervisor for agent.
func NewSupervisor(cfg SupervisorConfig, agent *Agent, log *zap.Logger) *Supervisor {
	if log == nil {
		log = zap.NewNop()
	}
	return &Supervisor{cfg: cfg, agent: agent, log: log}
}

// Run connects and reconnects until ctx is cancelled (returns nil), a fatal
// error (wraps ErrFatal), or the attempt budget is exhausted (wraps
// ErrAttemptsExhausted). Once the agent drains it starts no attempt: a
// ready session is served to its end, a lost one is not re-established
// (the node is stopping), and Run returns nil.
func (s *Supervisor) Run(ctx context.Context) error {
	// Registered before the first Draining check, so that a drain that
	// begins after that check pokes it.
	drained, unwatch := s.agent.wakeOnDrain()
	defer unwatch()
	failures := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		if s.agent.Draining() {
			s.log.Info("node draining: not connecting to this edge again")
			return nil
		}
		reachedReady, err := s.session(ctx, failures+1)
		if ctx.Err() != nil {
			return nil
		}
		var rej *nodewire.RejectedError
		if errors.As(err, &rej) && rej.Fatal() {
			return fmt.Errorf("%w: %w", ErrFatal, err)
		}
		if reachedReady {
			failures = 0 // the count resets only after ready
			s.log.Warn("edge session ended; reconnecting", zap.Error(err), zap.Duration("in", s.cfg.Interval))
		} else {
			failures++
			counted, exhausted := failures, s.cfg.MaxAttempts > 0 && failures >= s.cfg.MaxAttempts
			if s.watch != nil {
				counted, exhausted = s.watch.failed(failures)
			}
			s.log.Warn("edge connect attempt failed", zap.Int("attempt", counted), zap.Int("max_attempts", s.cfg.MaxAttempts), zap.Error(err))
			if exhausted {
				return fmt.Errorf("%w after %d attempts: %w", ErrAttemptsExhausted, counted, err)
			}
		}
		t := time.NewTimer(s.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-drained:
			// Checked at the top of the loop (the token may also be
			// one the drain left during the session).
			t.Stop()
		case <-t.C:
		}
		if s.watch != nil && !s.watch.next() {
			return nil
		}
	}
}

func (s *Supervisor) note(state string, attempt int, err error) {
	if s.onState != nil {
		s.onState(state, attempt, err)
	}
}

// session runs one connection from dial to its end. It reports whether the
// session reached ready, and why it ended.
func (s *Supervisor) session(ctx context.Context, attempt int) (bool, error) {
	s.note("dialing", attempt, nil)
	conn, resp, err := nodewire.Dial(ctx, s.cfg.Dial, &iop.RegisterRequest{
		ProtocolVersion: nodewire.ProtocolVersion,
		NodeId:          s.cfg.NodeID,
		Token:           s.cfg.Token,
		AgentVersion:    s.cfg.Version,
		AdapterTypes:    s.agent.AdapterTypes(),
	})
	if err != nil {
		s.note("failed", attempt, err)
		return false, err
	}
	defer conn.Close()
	s.agent.mu.Lock()
	s.agent.nodeID = resp.GetNodeId()
	s.agent.mu.Unlock()
	if status, err := s.agent.Apply(resp.GetConfig(), true); err != nil {
		err = fmt.Errorf("nodeagent: apply edge config (%s): %w", status, err)
		s.note("failed", attempt, err)
		return false, err
	}
	// A drain that began during this attempt (after Run's check) is said
	// in the ready request: the edge makes the providers live draining,
	// and grants nothing here. One that begins after this read is told
	// by the session's first load report, which reportLoad sends as soon
	// as the edge has the session live (it reads Draining once it is
	// registered with wakeOnDrain, so neither order misses it).
	ready := &iop.NodeReadyRequest{NodeId: resp.GetNodeId(), Adapters: s.agent.Capabilities(), Draining: s.agent.Draining()}
	if err := conn.ReadyWith(ctx, ready); err != nil {
		s.note("failed", attempt, err)
		return false, err
	}
	// The name follower counts the session before it is logged, so a
	// reader of the log line knows the follower does.
	if s.watch != nil {
		s.watch.ready()
	}
	// No node_id here: the process's logger carries it on every line
	// (cmd/iop-node), and the edge answers the id the node registered
	// with; zap would emit a second key of the same name.
	s.log.Info("edge session ready", zap.Int("adapters", len(resp.GetConfig().GetAdapters())), zap.Bool("draining", ready.GetDraining()))
	s.note("ready", attempt, nil)
	lctx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	// Owner: this session. Stops when the session ends (stopLoad below) or
	// a report cannot be sent.
	go func() {
		defer close(loadDone)
		s.agent.reportLoad(lctx, conn)
	}()
	// The streams' handlers know their session: the `transport` command
	// describes the connection it was asked on, whichever other edges the
	// node is connected to.
	err = conn.Serve(context.WithValue(ctx, sessionConnKey{}, conn), s.agent.HandleStream)
	stopLoad()
	<-loadDone
	if s.watch != nil {
		s.watch.lost()
	}
	s.note("lost", attempt, err)
	return true, err
}

// sessionConnKey is the context key under which a session's handlers find
// its connection.
type sessionConnKey struct{}

// sessionConn is the connection of the session serving ctx's stream, or
// nil outside one.
func sessionConn(ctx context.Context) *nodewire.ClientConn {
	c, _ := ctx.Value(sessionConnKey{}).(*nodewire.ClientConn)
	return c
}
