package chaos

import (
	"crypto/tls"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway"
	"github.com/iop-gateway/iop/internal/stack"
)

// testEdge is a stack edge (wired like cmd/iop-edge, HTTP server settings
// included) under the names these tests use.
type testEdge struct {
	URL      string
	NodeAddr string
	D        *dispatch.Dispatcher
	Srv      *gateway.Server
	Reg      *prometheus.Registry

	e *stack.Edge
}

type edgeOptions struct {
	TLS    *tls.Config // node wire TLS (nodewire.ServerTLSConfig)
	Logger *zap.Logger // nil: quietLogger
}

func startTestEdge(t testing.TB, cfg *config.Edge, opts edgeOptions) *testEdge {
	t.Helper()
	log := opts.Logger
	if log == nil {
		log = quietLogger(t)
	}
	e := stack.StartEdge(t, cfg, stack.EdgeOptions{Logger: log, TLS: opts.TLS})
	return &testEdge{URL: e.URL, NodeAddr: e.NodeAddr, D: e.Dispatcher, Srv: e.Server, Reg: e.Registry, e: e}
}

// Close stops the edge and waits for its goroutines. Idempotent.
func (e *testEdge) Close() { e.e.Close() }
