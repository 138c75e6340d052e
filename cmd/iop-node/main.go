// Command iop-node is the Node agent: it dials the Edge, registers, receives
// its adapter config and serves runs and tunnels against local backends.
//
// Exit codes: 0 after SIGINT/SIGTERM; 1 after a non-retryable error (bad
// config, credentials rejected by the Edge) or an exhausted finite
// reconnect budget; 2 from --check-config when the config has problems,
// and for bad flags (an unknown flag, an argument without --config).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/gcfloor"
	"github.com/iop-gateway/iop/nodeagent"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/adapters"
	"github.com/iop-gateway/iop/nodeagent/cli"
	"github.com/iop-gateway/iop/nodewire"
	"github.com/iop-gateway/iop/tracing"
)

var version = "dev"

func main() {
	// First: started as a CLI group's guard, the process is nothing else.
	cli.RunGuardIfAsked()
	os.Exit(run())
}

func run() int {
	// SIGHUP is taken first: one during start-up waits in hup instead
	// of killing the process (its default action).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// SIGINT and SIGTERM are taken as early: one that arrives during
	// start-up (a TLS file on a slow mount) stops the node once start-up
	// is through, with exit 0, instead of killing it by the signal; after
	// it, a second has its default action (startSignals).
	sigs := takeStartSignals(os.Interrupt, syscall.SIGTERM)
	defer sigs.stop()
	defer sigs.handOver() // start-up given up: lets the watcher go
	cfg, configFile, code := config.FromFlags("configs/node.yaml", config.LoadNode)
	if cfg == nil {
		return code
	}
	log, err := cfg.Log.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = log.Sync() }()
	log = log.With(zap.String("node_id", cfg.Node.ID))
	// The heap floor spares the collector most cycles while the live heap
	// is small; Close puts GOGC back.
	gcFloor := gcfloor.Start(cfg.Runtime.GCHeapFloorBytes())
	defer gcFloor.Close()

	dial := nodewire.DialConfig{Logger: log}
	if cfg.Edge.TLS.Enabled {
		t, err := nodewire.NewClientTLS(cfg.Edge.TLS.CAFile, cfg.Edge.TLS.ServerName, cfg.Edge.TLS.CertFile, cfg.Edge.TLS.KeyFile, log)
		if err != nil {
			var fe *nodewire.TLSFileError
			if errors.As(err, &fe) {
				err = config.FileKeysError("edge.tls", fe.Fields, fe.Files, err)
			}
			log.Error("cannot start", config.StartFields(configFile, fmt.Errorf("edge tls: %w", err))...)
			return 1
		}
		dial.TLS = t
	}
	for _, d := range []struct{ key, dir string }{{"store_dir", cfg.StoreDir}, {"workspace_root", cfg.WorkspaceRoot}} {
		if err := os.MkdirAll(d.dir, 0o750); err != nil {
			log.Error("cannot start", config.StartFields(configFile, &config.StartError{Keys: []string{d.key}, Files: []string{d.dir}, Err: err,
				Fix: "set " + d.key + " to a directory this user can create and write"})...)
			return 1
		}
	}
	agent := nodeagent.NewAgent(adapters.Factories(), adapter.Env{StoreDir: cfg.StoreDir, WorkspaceRoot: cfg.WorkspaceRoot, Logger: log})
	defer agent.Close()
	tp, shutdownTracing, err := tracing.Setup(context.Background(), cfg.Tracing, "iop-node")
	if err != nil {
		log.Error("cannot start", config.StartFields(configFile, config.TracingError(err))...)
		return 1
	}
	defer shutdownTracing()
	agent.SetTracerProvider(tp)

	policy := nodeagent.SupervisorConfig{
		Dial:        dial,
		NodeID:      cfg.Node.ID,
		Token:       cfg.Node.Token,
		Version:     version,
		Interval:    time.Duration(*cfg.Reconnect.IntervalSec * float64(time.Second)),
		MaxAttempts: *cfg.Reconnect.MaxAttempts,
	}

	// SIGHUP (taken at the top of run) would otherwise kill the node and
	// every run on it. The node has nothing to re-read: its providers
	// come from the edge (reload there), and its own file needs a restart.
	quit, hupDone := make(chan struct{}), make(chan struct{})
	defer func() { close(quit); <-hupDone }()
	// Owner: run. Logs each SIGHUP until run returns (quit), then run
	// waits for it. From the final stop (finalStop) no more come.
	go func() {
		defer close(hupDone)
		for {
			select {
			case <-quit:
				return
			case <-hup:
				log.Warn("SIGHUP ignored: providers come from the edge (reload it there); restart the node to apply its own config file")
			}
		}
	}()

	// Start-up is through: from here SIGINT and SIGTERM go to late, the
	// first starting the drain, a second cutting it short. It is the
	// channel that took them during start-up, so none is lost or falls
	// to its default action at the hand-over.
	if sig := sigs.handOver(); sig != nil {
		// A signal during start-up: nothing runs yet to drain.
		log.Info("iop-node stopped before it connected", zap.Stringer("signal", sig))
		return 0
	}
	late := sigs.ch
	// finalStop begins the final stop: from here SIGINT, SIGTERM and
	// SIGHUP have their default action, so a stop that hangs can still be
	// killed, whatever signal its operator (or a closing terminal) sends;
	// there are no runs left that ignoring SIGHUP would keep. A signal
	// that came just before is not lost (startSignals.final).
	finalStop := func() {
		signal.Stop(hup)
		sigs.final()
	}

	runCtx, cancelRun := context.WithCancel(context.Background())
	drainDone := make(chan struct{})
	defer func() { cancelRun(); <-drainDone }()
	// Owner: run. Waits for the first signal, drains (up to the bound or
	// a second signal), then stops the sessions (cancelRun); stops at
	// once when run returns first (the sessions gave up on their own).
	go func() {
		defer close(drainDone)
		select {
		case <-runCtx.Done():
		case sig := <-late:
			drainThenStop(runCtx, agent, cfg.Shutdown.Drain(), late, sig, log)
			cutInFlight(runCtx, agent, log)
			if beforeFinalStop != nil {
				beforeFinalStop(late)
			}
			// A signal from here on has its default action: a stop that
			// hangs can still be killed.
			finalStop()
			cancelRun()
		}
	}()
	log.Info("iop-node starting", zap.Strings("edges", cfg.Edge.Targets()), zap.Int("max_attempts", *cfg.Reconnect.MaxAttempts),
		zap.Duration("drain", cfg.Shutdown.Drain()))
	err = nodeagent.RunEdges(runCtx, policy, cfg.Edge.Targets(), len(cfg.Edge.Addresses) > 0, agent, log)
	// The node is stopping, whether a signal or its sessions ended it
	// (their reconnect budget ran out, a fatal refusal, the last session
	// of a drain lost): from here SIGINT, SIGTERM and SIGHUP have their
	// default action, so a stop that hangs (spans flushed to a collector that does
	// not answer, an adapter slow to close) can still be killed. Without
	// this, a signal after sessions that gave up on their own would go to
	// late, which nothing reads any more.
	finalStop()
	if err != nil {
		switch {
		case errors.Is(err, nodeagent.ErrFatal):
			log.Error("fatal: not retrying", zap.Error(err))
		case errors.Is(err, nodeagent.ErrAttemptsExhausted):
			log.Error("giving up", zap.Error(err))
		default:
			log.Error("stopped", zap.Error(err))
		}
		return 1
	}
	log.Info("iop-node stopped")
	return 0
}

// cutInFlight ends the runs and tunnels still in flight with a terminal
// that says the node stopped (edges fail over those that sent their
// caller nothing yet), waiting up to nodeagent.CutWait for those terminals.
func cutInFlight(ctx context.Context, agent *nodeagent.Agent, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(ctx, nodeagent.CutWait)
	defer cancel()
	if err := agent.Cut(ctx); err != nil {
		log.Warn("stopping with work whose end was not sent", zap.Duration("waited", nodeagent.CutWait))
	}
}

// beforeFinalStop is nil but in test builds (testhooks.go), where it can
// hold the drain's goroutine between the cut and the final stop: a signal
// landing in that moment cannot be placed there from outside.
var beforeFinalStop func(late chan os.Signal)

// drainThenStop is the node's answer to its first SIGINT/SIGTERM (sig):
// with a drain bound, the agent takes no new work, its edges are told,
// and the runs and tunnels in flight get up to bound to finish; a second
// signal (on late) cuts that short. The caller then stops the sessions,
// cutting whatever still runs.
func drainThenStop(ctx context.Context, agent *nodeagent.Agent, bound time.Duration, late <-chan os.Signal, sig os.Signal, log *zap.Logger) {
	if bound <= 0 {
		log.Info("stopping", zap.Stringer("signal", sig))
		return
	}
	log.Info("stopping: draining the work in flight first; a second signal stops at once", zap.Stringer("signal", sig), zap.Duration("drain", bound))
	dctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	drained := make(chan error, 1)
	// Owner: drainThenStop, which waits for it. Drain returns by the
	// bound, or at once after cancel.
	go func() { drained <- agent.Drain(dctx) }()
	select {
	case err := <-drained:
		switch {
		case err == nil:
			log.Info("drained: every run and tunnel ended")
		case errors.Is(err, context.DeadlineExceeded):
			log.Warn("drain bound reached: stopping with work still in flight", zap.Duration("drain", bound))
		}
	case sig := <-late:
		log.Warn("second signal: stopping now, cutting the work still in flight", zap.Stringer("signal", sig))
		cancel()
		<-drained
	}
}
