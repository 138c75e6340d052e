package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"go.uber.org/zap"
)

// Several edges. A node serving a cluster keeps one session with every
// edge, each under the same connect policy (SupervisorConfig) but its own
// Supervisor: its own dial, handshake, ready, heartbeat and fencing, so one
// edge going away never disturbs the sessions with the others. All
// sessions share the agent (its adapters and their capacity gates: the
// node's own bound on what reaches a backend, whichever edge sent the
// work). Every edge of a cluster serves the same config file; the node
// applies what each edge hands it, and identical configs change nothing.

// ErrNoEdge is returned when none of the configured edge addresses
// resolves.
var ErrNoEdge = errors.New("nodeagent: no edge address")

// RunEdges runs one Supervisor per edge address (base's Dial.Address is
// replaced) until ctx is cancelled or every one of them has stopped: it
// returns nil on cancellation, else the stopped supervisors' errors joined
// (a fatal rejection wraps ErrFatal). With resolve, a DNS name among the
// addresses stands for every address it resolves to (config.NodeEdge's
// addresses); without it the addresses are dialled as given.
func RunEdges(ctx context.Context, base SupervisorConfig, addresses []string, resolve bool, agent *Agent, log *zap.Logger) error {
	type target struct{ addr, serverName string }
	var targets []target
	for _, a := range addresses {
		host, port, err := net.SplitHostPort(a)
		if err != nil || !resolve || net.ParseIP(host) != nil {
			targets = append(targets, target{addr: a})
			continue
		}
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			log.Error("edge address does not resolve", zap.String("edge", a), zap.Error(err))
			continue
		}
		for _, ip := range ips {
			// TLS still verifies the name the operator wrote.
			targets = append(targets, target{addr: net.JoinHostPort(ip, port), serverName: host})
		}
	}
	if len(targets) == 0 {
		return fmt.Errorf("%w: none of %v resolves", ErrNoEdge, addresses)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, t := range targets {
		addr := t.addr
		cfg := base
		cfg.Dial.Address = addr
		if cfg.Dial.TLS != nil && t.serverName != "" && cfg.Dial.TLS.ServerName == "" {
			cfg.Dial.TLS = cfg.Dial.TLS.Clone()
			cfg.Dial.TLS.ServerName = t.serverName
		}
		sup := NewSupervisor(cfg, agent, log.With(zap.String("edge", addr)))
		wg.Add(1)
		// Owner: RunEdges. Stops when ctx is cancelled or this edge's
		// supervisor gives up (fatal rejection, attempts exhausted).
		go func() {
			defer wg.Done()
			if err := sup.Run(ctx); err != nil {
				log.Error("edge session loop stopped", zap.String("edge", addr), zap.Error(err))
				mu.Lock()
				errs = append(errs, fmt.Errorf("edge %s: %w", addr, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return errors.Join(errs...)
}
