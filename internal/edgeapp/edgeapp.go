// Package edgeapp assembles a whole iop-edge from its config: dispatcher,
// node-wire listener, HTTP surface, metrics and reload. iop-edge's main and
// the in-process test stack both start an edge through it, so end-to-end
// tests run the wiring that ships.
package edgeapp

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/gateway"
	"github.com/iop-gateway/iop/nodewire"
)

// DefaultHealthInterval is how often ready nodes' providers are polled for
// health when Options.HealthInterval is zero.
const DefaultHealthInterval = 5 * time.Second

// reloadRefreshTimeout bounds each node's config push during a reload.
const reloadRefreshTimeout = 15 * time.Second

// Options tunes New. The zero value is iop-edge's production wiring.
type Options struct {
	Logger *zap.Logger
	// Registry receives every metric; nil means a fresh registry.
	Registry *prometheus.Registry
	// Tracer traces API requests; nil means none.
	Tracer trace.TracerProvider
	// HealthInterval is the provider health poll period: zero means
	// DefaultHealthInterval, negative disables polling.
	HealthInterval time.Duration
	// ConfigFile, when set, is what POST /admin/reload and Reload re-read.
	ConfigFile string
	// Reload, when set, replaces the file-based reload (tests).
	Reload func() (*gateway.ReloadReport, error)
	// NodeTLS, when set, overrides the node listener's TLS from the config.
	NodeTLS *tls.Config
	// HandshakeTimeout overrides the node handshake deadline (0: default).
	HandshakeTimeout time.Duration
	// BusSize is the lifecycle event buffer; zero means 256.
	BusSize int
	// CancelGrace overrides the base of the leases' cancel grace
	// (dispatch.Options.CancelGrace; 0: the default). Tests of silent
	// nodes shorten it; iop-edge keeps the default (no config key).
	CancelGrace time.Duration
}

// Edge is an assembled edge, listening once New returns and serving once
// Serve runs.
type Edge struct {
	Dispatcher *dispatch.Dispatcher
	Server     *gateway.Server
	Registry   *prometheus.Registry
	Bus        *dispatch.ChanBus
	Log        *zap.Logger
	// HTTPAddr and NodeAddr are the bound listen addresses.
	HTTPAddr, NodeAddr string

	wire   *nodewire.Server
	hs     *http.Server
	nodeLn net.Listener
	httpLn net.Listener
	reload func() (*gateway.ReloadReport, error)
	// started is the config the edge was built with: what the keys a
	// reload cannot apply (coldKeys) are still running with. Read-only.
	started *config.Edge

	reloadMu sync.Mutex // serialises reloads (SIGHUP and POST /admin/reload)
	ctx      context.Context
	cancel   context.CancelFunc
	closeMu  sync.Once
	ledger   *cluster.Ledger // nil without cluster.redis.address; closed by Close
}

// New builds the edge for cfg (already normalized) and binds both
// listeners. A bind failure is returned; nothing is left running.
func New(cfg *config.Edge, opts Options) (*Edge, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if opts.BusSize <= 0 {
		opts.BusSize = 256
	}
	health := opts.HealthInterval
	switch {
	case health == 0:
		health = DefaultHealthInterval
	case health < 0:
		health = 0
	}
	wcfg := nodewire.ServerConfig{
		TLS: opts.NodeTLS, Logger: log, HandshakeTimeout: opts.HandshakeTimeout,
		// Normalized: both positive, or max_node_conns negative for no cap
		// (nodewire reads negative the same way).
		MaxPendingHandshakes: cfg.Listen.MaxPendingHandshakes,
		MaxConns:             cfg.Listen.MaxNodeConns,
	}
	if wcfg.TLS == nil && cfg.Listen.TLS.Enabled() {
		t, err := nodewire.ServerTLSConfig(cfg.Listen.TLS.CertFile, cfg.Listen.TLS.KeyFile, cfg.Listen.TLS.ClientCAFile, log)
		if err != nil {
			var fe *nodewire.TLSFileError
			if errors.As(err, &fe) {
				err = config.FileKeysError("listen.tls", fe.Fields, fe.Files, err)
			}
			return nil, fmt.Errorf("edgeapp: node listener tls: %w", err)
		}
		wcfg.TLS = t
	}
	nodeLn, err := net.Listen("tcp", cfg.Listen.Node)
	if err != nil {
		return nil, fmt.Errorf("edgeapp: listen node wire: %w", listenError("listen.node", err))
	}
	httpLn, err := net.Listen("tcp", cfg.Listen.HTTP)
	if err != nil {
		_ = nodeLn.Close()
		return nil, fmt.Errorf("edgeapp: listen http: %w", listenError("listen.http", err))
	}
	if n := cfg.Listen.MaxHTTPConns; n > 0 {
		// Beyond the cap, connections wait in the kernel's accept backlog
		// instead of costing descriptors and goroutines here.
		httpLn = newLimitListener(httpLn, n)
	}

	bus := dispatch.NewChanBus(opts.BusSize)
	dopts := dispatch.Options{Logger: log, Bus: bus, Metrics: dispatch.NewMetrics(reg), HealthInterval: health, CancelGrace: opts.CancelGrace}
	var ledger *cluster.Ledger
	if r := cfg.Cluster.Redis; r.Address != "" {
		cluster.UseLogger(log)
		ledger = cluster.Open(cluster.Config{
			Address: r.Address, Password: r.Password, DB: r.DB, TTL: r.LeaseTTL(),
			Timeout: time.Duration(r.TimeoutMS) * time.Millisecond, EdgeID: edgeID(), KeyPrefix: r.KeyPrefix,
		})
		dopts.Ledger, dopts.LedgerTTL = ledger, r.LeaseTTL()
		log.Info("sharing leases with the cluster", zap.String("redis", r.Address), zap.String("key_prefix", r.KeyPrefix), zap.Float64("lease_ttl_sec", r.LeaseTTLSec))
		// Not a start failure: the edge is made to start while Redis is
		// down and to resume by itself once it answers (docs/cluster.md).
		// But until then every grant is a 503, so the start says so, once,
		// naming the key. One ping, bounded by timeout_ms.
		if err := ledger.Ping(context.Background()); err != nil {
			msg, se := redisStartError(err, r.DB)
			log.Warn(msg, config.StartFields("", se)...)
		}
	}
	d := dispatch.New(cfg, dopts)
	reg.MustRegister(dispatch.NewStatusCollector(d))
	ctx, cancel := context.WithCancel(context.Background())
	e := &Edge{
		Dispatcher: d, Registry: reg, Bus: bus, Log: log,
		HTTPAddr: httpLn.Addr().String(), NodeAddr: nodeLn.Addr().String(),
		nodeLn: nodeLn, httpLn: httpLn, ctx: ctx, cancel: cancel, ledger: ledger, started: cfg,
	}
	e.reload = opts.Reload
	if e.reload == nil && opts.ConfigFile != "" {
		file := opts.ConfigFile
		e.reload = func() (*gateway.ReloadReport, error) { return e.reloadFile(file) }
	}
	var reload func() (*gateway.ReloadReport, error)
	if e.reload != nil {
		reload = e.Reload
	}
	e.Server = gateway.New(gateway.Options{Dispatcher: d, Config: cfg, Logger: log, Metrics: gateway.NewMetrics(reg),
		Gatherer: reg, Reload: reload, Tracer: opts.Tracer})
	wcfg.Handler = d
	e.wire = nodewire.NewServer(wcfg)
	e.hs = e.Server.HTTPServer()
	return e, nil
}

// The start's warnings about a Redis that failed its ping, and the fix
// for one that did not answer.
const (
	redisSilentMsg  = "redis does not answer at start; requests get 503 cluster_unavailable until it does"
	redisRefusedMsg = "redis refuses the edge at start; requests get 503 cluster_unavailable until it accepts it"
	redisAddressFix = "start Redis at cluster.redis.address, or set cluster.redis.address to one that answers"
)

// redisStartError is the start's warning about a Redis that failed its
// ping, and the key to look at: one that answered with an error reply
// refuses the edge, and NOAUTH or WRONGPASS (no password for a Redis
// that asks one, or not its password) is cluster.redis.password_env's;
// another error reply names the address and, when set, db (the
// connection's SELECT: "ERR DB index is out of range"); no reply at all
// (refused, unreachable, silent past timeout_ms) is the address's.
func redisStartError(err error, db int) (string, *config.StartError) {
	switch cluster.ReplyKind(err) {
	case "":
		return redisSilentMsg, &config.StartError{Keys: []string{"cluster.redis.address"}, Err: err, Fix: redisAddressFix}
	case "NOAUTH", "WRONGPASS":
		return redisRefusedMsg, &config.StartError{Keys: []string{"cluster.redis.password_env"}, Err: err,
			Fix: "set cluster.redis.password_env to the name of an environment variable holding this Redis's password"}
	default:
		keys := []string{"cluster.redis.address"}
		if db != 0 {
			keys = append(keys, "cluster.redis.db")
		}
		return redisRefusedMsg, &config.StartError{Keys: keys, Err: err,
			Fix: "Redis answered with this error: set cluster.redis.db to a database it has, or point cluster.redis.address at a Redis that accepts the edge"}
	}
}

// listenError names key, the listen address that could not be bound, and
// the way out: another process on the port, or an address this host
// does not have.
func listenError(key string, err error) error {
	fix := "set " + key + " to an address of this host that is free to bind"
	if errors.Is(err, syscall.EADDRINUSE) {
		fix = "another process listens there: stop it, or set " + key + " to a free port"
	}
	return &config.StartError{Keys: []string{key}, Fix: fix, Err: err}
}

// Serve runs both listeners until Close. It returns the first serving
// failure (a listener that stopped for any reason but Close); temporary
// accept errors, such as running out of descriptors, never end it.
func (e *Edge) Serve() error {
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	// Owner: Serve. Stops when Close closes the node server.
	go func() {
		defer wg.Done()
		if err := e.wire.Serve(e.nodeLn); err != nil {
			errc <- fmt.Errorf("edgeapp: node listener: %w", err)
		}
	}()
	// Owner: Serve. Stops when Close shuts the HTTP server down.
	go func() {
		defer wg.Done()
		if err := e.hs.Serve(e.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("edgeapp: http listener: %w", err)
		}
	}()
	var err error
	select {
	case err = <-errc:
	case <-e.ctx.Done():
	}
	e.Close()
	wg.Wait()
	return err
}

// Reload re-reads the config (POST /admin/reload, SIGHUP): validate, swap
// into the dispatcher and the HTTP surface's auth, limits and models, then
// push refreshes to affected ready nodes. Reloads never overlap.
func (e *Edge) Reload() (*gateway.ReloadReport, error) {
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	if e.reload == nil {
		return nil, errors.New("edgeapp: reload is not configured")
	}
	return e.reload()
}

func (e *Edge) reloadFile(file string) (*gateway.ReloadReport, error) {
	next, err := config.LoadEdge(file)
	if err != nil {
		e.Log.Warn("reload rejected; config unchanged", zap.Error(err))
		return nil, err
	}
	// The HTTP surface takes the new config together with the dispatcher,
	// before the nodes' refreshes: a revoked API key or admin token must
	// not stay valid while silent nodes are waited for, and the surface's
	// model list must match the dispatcher's.
	refresh := e.Dispatcher.Reload(next)
	e.Server.SetConfig(next)
	rep := &gateway.ReloadReport{Nodes: e.Dispatcher.RefreshNodes(e.ctx, refresh, reloadRefreshTimeout)}
	rep.RestartRequired = restartRequired(e.started, next)
	e.Log.Info("config reloaded", zap.Any("refresh", rep.Nodes))
	if len(rep.RestartRequired) > 0 {
		e.Log.Warn("config reloaded; these keys changed but take effect only after a restart",
			zap.Strings("keys", rep.RestartRequired))
	}
	return rep, nil
}

// ShutdownDrain bounds how long Close lets requests in flight (and queued
// ones that get a slot meanwhile) finish.
const ShutdownDrain = 10 * time.Second

// MaxStop is the longest Close takes with every bound reached: the drain,
// then the dispatcher's last ledger updates (dispatch.CloseFlush) and the
// ledger's wait for the returns sent after it (cluster.CloseWait). A
// container's stop grace must be longer, or the edge is killed before its
// slots are returned to Redis (they stay taken for the lease TTL).
const MaxStop = ShutdownDrain + dispatch.CloseFlush + cluster.CloseWait

// Close stops the edge: the HTTP listener stops accepting, requests in
// flight drain for up to ShutdownDrain, then requests still queued fail,
// the dispatcher stops and node connections close. Idempotent.
//
// The dispatcher outlives the drain: in shared mode its ledger loop is what
// returns (and renews) the slots of requests that end during it; closed
// first, those slots stayed taken in Redis for the lease TTL, and a drain
// longer than the TTL let other edges take slots still in use.
func (e *Edge) Close() {
	e.closeMu.Do(func() {
		e.cancel()
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownDrain)
		defer cancel()
		drained := e.hs.Shutdown(sctx) == nil
		e.Dispatcher.Close()
		if !drained {
			_ = e.hs.Close()
		}
		// Node connections close before the ledger: the leases of
		// requests still running are returned as node_lost, and the
		// ledger's Close waits (up to cluster.CloseWait) for those
		// returns, sent after the dispatcher's Close, to reach Redis.
		_ = e.wire.Close()
		if e.ledger != nil {
			_ = e.ledger.Close()
		}
		// The servers close the listeners they served; these are for an
		// edge whose Serve never ran, whose ports would otherwise stay
		// bound. Closed last: closed under a running Serve, a listener
		// would end it with an error instead of a shutdown.
		_ = e.httpLn.Close()
		_ = e.nodeLn.Close()
	})
}

// edgeID names this edge process in the cluster ledger's lease ids: its
// host name and a random suffix, so a restarted edge never renews its
// predecessor's leases.
func edgeID() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}
