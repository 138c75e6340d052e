package chaos

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway"
	"github.com/iop-gateway/iop/nodewire"
)

// testEdge is an edge wired exactly like stack.StartEdge, plus what the
// stack does not offer: TLS on the node wire, and the HTTP server settings
// of cmd/iop-edge (MaxHeaderBytes 64 KiB, idle timeout), so bad-input and
// security tests see what the shipped binary would do.
type testEdge struct {
	URL      string
	NodeAddr string
	D        *dispatch.Dispatcher
	Srv      *gateway.Server
	Reg      *prometheus.Registry

	wire *nodewire.Server
	hs   *http.Server
	wg   sync.WaitGroup
	once sync.Once
}

type edgeOptions struct {
	TLS    *tls.Config // node wire TLS (nodewire.ServerTLSConfig)
	Logger *zap.Logger // nil: quietLogger
}

func startTestEdge(t testing.TB, cfg *config.Edge, opts edgeOptions) *testEdge {
	t.Helper()
	cfg.Listen.HTTP, cfg.Listen.Node = "127.0.0.1:0", "127.0.0.1:0"
	if err := cfg.Normalize(); err != nil {
		t.Fatalf("edge config: %v", err)
	}
	log := opts.Logger
	if log == nil {
		log = quietLogger(t)
	}
	reg := prometheus.NewRegistry()
	d := dispatch.New(cfg, dispatch.Options{Logger: log, Bus: dispatch.NewChanBus(1024), Metrics: dispatch.NewMetrics(reg)})
	reg.MustRegister(dispatch.NewStatusCollector(d))
	srv := gateway.New(gateway.Options{Dispatcher: d, Config: cfg, Logger: log, Metrics: gateway.NewMetrics(reg), Gatherer: reg})
	nodeLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &testEdge{
		URL: "http://" + httpLn.Addr().String(), NodeAddr: nodeLn.Addr().String(), D: d, Srv: srv, Reg: reg,
		wire: nodewire.NewServer(nodewire.ServerConfig{TLS: opts.TLS, Handler: d, Logger: log, HandshakeTimeout: 5 * time.Second}),
		hs:   &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10, IdleTimeout: 120 * time.Second},
	}
	e.wg.Add(2)
	// Owner: the testEdge; stops at Close (wire.Close).
	go func() { defer e.wg.Done(); _ = e.wire.Serve(nodeLn) }()
	// Owner: the testEdge; stops at Close (hs.Shutdown/Close).
	go func() { defer e.wg.Done(); _ = e.hs.Serve(httpLn) }()
	t.Cleanup(e.Close)
	return e
}

// Close stops the edge and waits for its goroutines. Idempotent.
func (e *testEdge) Close() {
	e.once.Do(func() {
		e.D.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.hs.Shutdown(ctx)
		_ = e.hs.Close()
		_ = e.wire.Close()
		e.wg.Wait()
	})
}
