package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodewire"
)

// Several edges. A node serving a cluster keeps one session with every
// edge, each under the same connect policy (SupervisorConfig) but its own
// Supervisor: its own dial, handshake, ready, heartbeat and fencing, so one
// edge going away never disturbs the sessions with the others. All
// sessions share the agent (its adapters and their capacity gates: the
// node's own bound on what reaches a backend, whichever edge sent the
// work). Every edge of a cluster serves the same config file; the node
// applies what each edge hands it, and identical configs change nothing.

// ErrNoEdge is wrapped in the error of an edge name that did not resolve
// within the attempt budget (with ErrAttemptsExhausted).
var ErrNoEdge = errors.New("nodeagent: no edge address")

// lookupHost resolves an edge's DNS name (a variable so that tests can
// stand in for DNS).
var lookupHost = net.DefaultResolver.LookupHost

// RunEdges runs one Supervisor per edge address (base's Dial.Address is
// replaced) until ctx is cancelled or every one of them has stopped: it
// returns nil on cancellation, else the stopped supervisors' errors joined
// (a fatal rejection wraps ErrFatal). With resolve, a DNS name among the
// addresses stands for every address it resolves to (config.NodeEdge's
// addresses), of one family (oneFamily); without it the addresses are
// dialled as given.
//
// A name that does not resolve is looked up again under the connect
// policy, each failed lookup counting as a failed attempt: DNS that is not
// there yet when the node starts (or is briefly down) is a retryable
// remote failure, not a reason to exit or to leave that edge out.
func RunEdges(ctx context.Context, base SupervisorConfig, addresses []string, resolve bool, agent *Agent, log *zap.Logger) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error // guarded by mu
	)
	stopped := func(edge string, err error) {
		mu.Lock()
		errs = append(errs, fmt.Errorf("edge %s: %w", edge, err))
		mu.Unlock()
	}
	start := func(addr, serverName string) {
		cfg := base
		cfg.Dial.Address = addr
		// TLS still verifies the name the operator wrote (unless
		// edge.tls.server_name names another).
		cfg.Dial.ServerName = serverName
		sup := NewSupervisor(cfg, agent, log.With(zap.String("edge", addr)))
		wg.Add(1)
		// Owner: RunEdges. Stops when ctx is cancelled or this edge's
		// supervisor gives up (fatal rejection, attempts exhausted).
		go func() {
			defer wg.Done()
			if err := sup.Run(ctx); err != nil {
				log.Error("edge session loop stopped", zap.String("edge", addr), zap.Error(err))
				stopped(addr, err)
			}
		}()
	}
	for _, a := range addresses {
		host, port, err := net.SplitHostPort(a)
		if err != nil || !resolve || net.ParseIP(host) != nil {
			start(a, "")
			continue
		}
		wg.Add(1)
		// Owner: RunEdges. Stops once the name resolved (its supervisors,
		// started here, then count in wg of their own), ctx is cancelled
		// or the attempt budget runs out.
		go func() {
			defer wg.Done()
			ips, err := resolveEdge(ctx, base, host, log.With(zap.String("edge", a)))
			if err != nil {
				if ctx.Err() == nil {
					log.Error("edge address does not resolve; giving up", zap.String("edge", a), zap.Error(err))
					stopped(a, err)
				}
				return
			}
			for _, ip := range oneFamily(ips) {
				start(net.JoinHostPort(ip, port), host)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return errors.Join(errs...)
}

// oneFamily keeps the IPv4 addresses of ips when there are any, else all
// of them (IPv6). A dual-stack edge has an A and an AAAA record: a session
// through each would be two sessions of one node with one edge, each
// registration superseding the other, every reconnect interval, with the
// runs on it.
func oneFamily(ips []string) []string {
	var v4 []string
	for _, ip := range ips {
		if a := net.ParseIP(ip); a != nil && a.To4() != nil {
			v4 = append(v4, ip)
		}
	}
	if len(v4) > 0 {
		return v4
	}
	return ips
}

// resolveEdge looks host up until it resolves, ctx ends or base's attempt
// budget runs out (then the error wraps ErrNoEdge and
// ErrAttemptsExhausted). Each lookup is bounded as a handshake is.
func resolveEdge(ctx context.Context, base SupervisorConfig, host string, log *zap.Logger) ([]string, error) {
	bound := base.Dial.HandshakeTimeout
	if bound <= 0 {
		bound = nodewire.DefaultHandshakeTimeout
	}
	for failures := 1; ; failures++ {
		lctx, cancel := context.WithTimeout(ctx, bound)
		ips, err := lookupHost(lctx, host)
		cancel()
		if err == nil && len(ips) > 0 {
			return ips, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			err = fmt.Errorf("%w: %s has no address", ErrNoEdge, host)
		} else {
			err = fmt.Errorf("%w: %w", ErrNoEdge, err)
		}
		log.Warn("edge address does not resolve", zap.Int("attempt", failures), zap.Int("max_attempts", base.MaxAttempts), zap.Error(err))
		if base.MaxAttempts > 0 && failures >= base.MaxAttempts {
			return nil, fmt.Errorf("%w after %d attempts: %w", ErrAttemptsExhausted, failures, err)
		}
		t := time.NewTimer(base.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
