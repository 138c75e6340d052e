// Command iop-edge is the gateway: the OpenAI-compatible HTTP surface and
// the node wire listener.
//
// Exit codes: 0 after SIGINT/SIGTERM; 1 when it cannot start (bad config,
// listen failure); 2 from --check-config when the config has problems.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway"
	"github.com/iop-gateway/iop/nodewire"
	"github.com/iop-gateway/iop/tracing"
)

func main() { os.Exit(run()) }

func run() int {
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

	tp, shutdownTracing, err := tracing.Setup(context.Background(), cfg.Tracing, "iop-edge")
	if err != nil {
		log.Error("tracing", zap.Error(err))
		return 1
	}
	defer shutdownTracing()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	bus := dispatch.NewChanBus(256)
	d := dispatch.New(cfg, dispatch.Options{Logger: log, Bus: bus, Metrics: dispatch.NewMetrics(reg), HealthInterval: 5 * time.Second})
	reg.MustRegister(dispatch.NewStatusCollector(d))

	var wg sync.WaitGroup
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	wg.Add(1)
	// Owner: run. Logs lifecycle events from the bus until shutdown; the bus
	// may drop, nothing depends on this.
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-bus.Events():
				log.Info("node event", zap.String("event", e.Type), zap.String("node_id", e.NodeID))
			}
		}
	}()

	var reloadMu sync.Mutex
	var srv *gateway.Server
	reload := func() (*gateway.ReloadReport, error) {
		reloadMu.Lock()
		defer reloadMu.Unlock()
		next, err := config.LoadEdge(configFile)
		if err != nil {
			log.Warn("reload rejected; config unchanged", zap.Error(err))
			return nil, err
		}
		rep := &gateway.ReloadReport{Nodes: d.ReloadAndRefresh(ctx, next, 15*time.Second)}
		srv.SetConfig(next)
		log.Info("config reloaded", zap.Any("refresh", rep.Nodes))
		return rep, nil
	}
	srv = gateway.New(gateway.Options{Dispatcher: d, Config: cfg, Logger: log, Metrics: gateway.NewMetrics(reg), Gatherer: reg, Reload: reload, Tracer: tp})

	wcfg := nodewire.ServerConfig{Handler: d, Logger: log}
	if cfg.Listen.TLS.Enabled() {
		t, err := nodewire.ServerTLSConfig(cfg.Listen.TLS.CertFile, cfg.Listen.TLS.KeyFile, cfg.Listen.TLS.ClientCAFile)
		if err != nil {
			log.Error("node listener tls", zap.Error(err))
			return 1
		}
		wcfg.TLS = t
	}
	nodeLn, err := net.Listen("tcp", cfg.Listen.Node)
	if err != nil {
		log.Error("listen node wire", zap.Error(err))
		return 1
	}
	httpLn, err := net.Listen("tcp", cfg.Listen.HTTP)
	if err != nil {
		_ = nodeLn.Close()
		log.Error("listen http", zap.Error(err))
		return 1
	}
	wire := nodewire.NewServer(wcfg)
	hs := srv.HTTPServer()

	errc := make(chan error, 2)
	wg.Add(2)
	// Owner: run. Stops when wire.Close is called at shutdown.
	go func() { defer wg.Done(); errc <- wire.Serve(nodeLn) }()
	// Owner: run. Stops when hs.Shutdown is called at shutdown.
	go func() {
		defer wg.Done()
		if err := hs.Serve(httpLn); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	log.Info("iop-edge listening", zap.String("http", cfg.Listen.HTTP), zap.String("node", cfg.Listen.Node), zap.Bool("node_tls", wcfg.TLS != nil))

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	code = 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-hup:
			_, _ = reload()
		case err := <-errc:
			if err != nil {
				log.Error("server failed", zap.Error(err))
				code = 1
			}
			break loop
		}
	}
	stop()
	log.Info("iop-edge shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d.Close()
	_ = hs.Shutdown(sctx)
	_ = wire.Close()
	wg.Wait()
	return code
}
