// Command iop-edge is the gateway: the OpenAI-compatible HTTP surface and
// the node wire listener.
//
// Exit codes: 0 after SIGINT/SIGTERM; 1 when it cannot start (bad config,
// listen failure) or a listener fails for good; 2 from --check-config when
// the config has problems, and for bad flags. Running out of file
// descriptors is not a failure: the listeners back off and keep accepting.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/edgeapp"
	"github.com/iop-gateway/iop/internal/gcfloor"
	"github.com/iop-gateway/iop/tracing"
)

func main() { os.Exit(run()) }

func run() int {
	// SIGHUP is taken first: one during start-up waits in hup instead
	// of killing the process (its default action).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// SIGINT and SIGTERM are taken as early: one that arrives during
	// start-up (a TLS file on a slow mount) stops the edge once it is up,
	// with exit 0, instead of killing it by the signal.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first, a second signal has its default action: a start-up
	// that hangs (a file that never reads) can still be killed by one.
	context.AfterFunc(ctx, stop)
	cfg, configFile, code := config.FromFlags("configs/edge.yaml", config.LoadEdge)
	if cfg == nil {
		return code
	}
	log, err := cfg.Log.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = log.Sync() }()
	// The heap floor spares the collector most cycles while the live heap
	// is small; Close puts GOGC back.
	gcFloor := gcfloor.Start(cfg.Runtime.GCHeapFloorBytes())
	defer gcFloor.Close()

	tp, shutdownTracing, err := tracing.Setup(context.Background(), cfg.Tracing, "iop-edge")
	if err != nil {
		log.Error("cannot start", config.StartFields(configFile, config.TracingError(err))...)
		return 1
	}
	defer shutdownTracing()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	edge, err := edgeapp.New(cfg, edgeapp.Options{Logger: log, Registry: reg, Tracer: tp, ConfigFile: configFile})
	if err != nil {
		log.Error("cannot start", config.StartFields(configFile, err)...)
		return 1
	}

	var wg sync.WaitGroup
	wg.Add(1)
	// Owner: run. Logs lifecycle events from the bus until shutdown; the bus
	// may drop, nothing depends on this.
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-edge.Bus.Events():
				log.Info("node event", zap.String("event", e.Type), zap.String("node_id", e.NodeID))
			}
		}
	}()

	serveErr := make(chan error, 1)
	wg.Add(1)
	// Owner: run. Stops when edge.Close is called at shutdown, or when a
	// listener fails for good.
	go func() { defer wg.Done(); serveErr <- edge.Serve() }()
	log.Info("iop-edge listening", zap.String("http", edge.HTTPAddr), zap.String("node", edge.NodeAddr), zap.Bool("node_tls", cfg.Listen.TLS.Enabled()))

	wg.Add(1)
	// Owner: run. Serves SIGHUP reloads one at a time until shutdown. A
	// reload may wait on its nodes' refreshes (up to 15 s each); it runs
	// here, not in the loop below, so SIGTERM is never held behind it, and
	// edge.Close cuts it short.
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if ctx.Err() == nil {
					_, _ = edge.Reload()
				}
			}
		}
	}()
	code = 0
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if err != nil {
			log.Error("server failed", zap.Error(err))
			code = 1
		}
	}
	stop()
	log.Info("iop-edge shutting down")
	edge.Close()
	wg.Wait()
	// The last line: "shutting down" alone leaves an operator unsure the
	// requests in flight were let finish and the process is gone.
	log.Info("iop-edge stopped", zap.Int("exit_code", code))
	return code
}
