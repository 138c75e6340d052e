package nodewire

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"go.uber.org/zap"
)

// ServerTLSConfig builds the Edge listener's TLS config. clientCAFile, when
// set, turns on mutual TLS: Nodes must present a certificate it signed.
// The key pair and the client CA are loaded again when their files change
// (see certReloader, poolReloader). With mutual TLS, handshakes use copies
// of the returned config: change it before it is used, or not at all.
// A reload that fails is logged by the Server given the config (not a
// clone of it) as ServerConfig.TLS, with its logger.
func ServerTLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	ts := &tlsState{}
	r, err := newCertReloader(certFile, keyFile, "node listener: tls key pair", &ts.log)
	if err != nil {
		return nil, fmt.Errorf("nodewire: tls key pair: %w", err)
	}
	cfg := &tls.Config{GetCertificate: r.getServer, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pr, err := newPoolReloader(clientCAFile, "node listener: client CA", "client_ca_file", &ts.log)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pr.pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		// The config a handshake uses: cfg with the CA pool of the moment
		// (rebuilt only when the pool changes).
		ca := &caReloader{pools: pr, base: cfg.Clone(), cfg: cfg.Clone(), cfgPool: pr.pool}
		cfg.GetConfigForClient = ca.get
	}
	registerTLSState(cfg, ts)
	return cfg, nil
}

// ClientTLSConfig builds the Node dialer's TLS config. caFile empty means the
// system roots; certFile/keyFile set present a client certificate (mutual TLS).
// Both are loaded again when their files change, as the edge's are: a
// client certificate renewed in place is presented, and a CA rotated in
// place trusted, from the next dial on, when Dial is given this config
// (not a copy of it); Dial logs a reload that fails with its logger.
func ClientTLSConfig(caFile, serverName, certFile, keyFile string) (*tls.Config, error) {
	ts := &tlsState{}
	cfg := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pr, err := newPoolReloader(caFile, "edge dialer: CA", "ca_file", &ts.log)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pr.pool
		ts.roots = pr
	}
	if certFile != "" || keyFile != "" {
		r, err := newCertReloader(certFile, keyFile, "edge dialer: tls client key pair", &ts.log)
		if err != nil {
			return nil, fmt.Errorf("nodewire: tls client key pair: %w", err)
		}
		cfg.GetClientCertificate = r.getClient
	}
	registerTLSState(cfg, ts)
	return cfg, nil
}

// tlsState is what a config built here carries beside the tls.Config: the
// logger of its reloaders and, for a node's dialer, the reloader of the CA
// that verifies the edge (a dial applies its pool of the moment: a client
// config has no callback for its roots).
type tlsState struct {
	log   reloadLog
	roots *poolReloader // nil: the system roots
}

// tlsStates finds the tlsState of a config built here. It holds the config
// weakly: an entry goes when its config is collected.
var tlsStates sync.Map // weak.Pointer[tls.Config] -> *tlsState

func registerTLSState(cfg *tls.Config, ts *tlsState) {
	key := weak.Make(cfg)
	tlsStates.Store(key, ts)
	runtime.AddCleanup(cfg, func(key weak.Pointer[tls.Config]) { tlsStates.Delete(key) }, key)
}

// tlsStateOf is cfg's tlsState, or nil when cfg was not built here (or
// is a copy of one that was).
func tlsStateOf(cfg *tls.Config) *tlsState {
	if cfg == nil {
		return nil
	}
	if ts, ok := tlsStates.Load(weak.Make(cfg)); ok {
		return ts.(*tlsState)
	}
	return nil
}

// attachReloadLog has the reloaders of cfg, when it was built here, log
// with log.
func attachReloadLog(cfg *tls.Config, log *zap.Logger) {
	if ts := tlsStateOf(cfg); ts != nil {
		ts.log.log.Store(log)
	}
}

// dialTLSConfig is cfg for one dial: with the CA pool of the moment when
// ClientTLSConfig built cfg (a copy, cfg itself is not changed).
func dialTLSConfig(cfg *tls.Config) *tls.Config {
	ts := tlsStateOf(cfg)
	if ts == nil || ts.roots == nil {
		return cfg
	}
	pool := ts.roots.get()
	if pool == cfg.RootCAs {
		return cfg
	}
	cfg = cfg.Clone()
	cfg.RootCAs = pool
	return cfg
}

// reloadLog is the logger of a config's reloaders: none until a Server or
// Dial is given the config (attachReloadLog), since the config is built
// before either and carries no logger of its own.
type reloadLog struct {
	log atomic.Pointer[zap.Logger]
}

// failed logs a reload that failed; the reloaders call it once per change
// of the files (not per handshake), as they try a load only then. The
// error names files and what is wrong with them, never their contents.
func (l *reloadLog) failed(msg string, fields ...zap.Field) {
	if log := l.log.Load(); log != nil {
		log.Warn(msg, fields...)
	}
}

// reloaded logs a reload that succeeded.
func (l *reloadLog) reloaded(msg string, fields ...zap.Field) {
	if log := l.log.Load(); log != nil {
		log.Info(msg, fields...)
	}
}

// poolReloader serves the CA pool in file, loading it again when the
// file's size or modification time changed since the last look, as
// certReloader does for a key pair: a CA rotated in place (certificates
// reissued by a new CA) is trusted from the next handshake on. A file that
// does not load leaves the previous pool in use until it changes again.
type poolReloader struct {
	file  string
	name  string // for logs: whose CA it is
	field string // for logs: the config key of file
	log   *reloadLog

	mu    sync.Mutex
	pool  *x509.CertPool // guarded by mu: the pool in use
	stamp fileStamp      // guarded by mu: the file when last loaded, or last failed to load
}

func newPoolReloader(file, name, field string, log *reloadLog) (*poolReloader, error) {
	r := &poolReloader{file: file, name: name, field: field, log: log, stamp: stampOf(file)}
	pool, err := loadPool(file)
	if err != nil {
		return nil, err
	}
	r.pool = pool
	return r, nil
}

// get returns the pool in use, loading the file again first if it changed.
func (r *poolReloader) get() *x509.CertPool {
	st := stampOf(r.file)
	r.mu.Lock()
	if st == r.stamp {
		defer r.mu.Unlock()
		return r.pool
	}
	r.stamp = st
	loaded, err := loadPool(r.file)
	if err == nil {
		r.pool = loaded
	}
	pool := r.pool
	r.mu.Unlock()
	// Logged once per change of the file: the next look finds the stamp
	// recorded above and loads nothing.
	if err != nil {
		r.log.failed(r.name+" did not reload; the previous one is still trusted",
			zap.String(r.field, r.file), zap.Error(err))
	} else {
		r.log.reloaded(r.name+" reloaded", zap.String(r.field, r.file))
	}
	return pool
}

// caReloader hands each handshake of the edge's listener its config with
// the client CA pool of the moment.
type caReloader struct {
	pools *poolReloader
	base  *tls.Config // the listener's config without a GetConfigForClient; never changed

	mu      sync.Mutex
	cfg     *tls.Config    // guarded by mu: base with cfgPool
	cfgPool *x509.CertPool // guarded by mu
}

func (r *caReloader) get(*tls.ClientHelloInfo) (*tls.Config, error) {
	pool := r.pools.get()
	r.mu.Lock()
	defer r.mu.Unlock()
	if pool != r.cfgPool {
		cfg := r.base.Clone()
		cfg.ClientCAs = pool
		r.cfg, r.cfgPool = cfg, pool
	}
	return r.cfg, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("nodewire: read ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("nodewire: ca file holds no PEM certificate")
	}
	return pool, nil
}

// certReloader serves the key pair in certFile and keyFile, loading it
// again when either file's size or modification time changed since the
// last look: a certificate renewed in place (ACME, cert-manager) is served
// from the next handshake on, while a restart-only process would go on
// presenting the old one until it expired and every reconnect failed. A
// pair that does not load (the certificate written, its key not yet)
// leaves the previous one in use until the files change again. A
// handshake costs two stat calls; a load happens only on a change.
type certReloader struct {
	certFile, keyFile string
	name              string // for logs: whose key pair it is
	log               *reloadLog

	mu    sync.Mutex
	cert  *tls.Certificate // guarded by mu: the pair served
	stamp [2]fileStamp     // guarded by mu: the files when last loaded, or last failed to load
}

func newCertReloader(certFile, keyFile, name string, log *reloadLog) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, name: name, log: log}
	r.stamp = r.stampFiles()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert = &cert
	return r, nil
}

// fileStamp is what tells a changed file: its size and modification time
// (zero when it cannot be read).
type fileStamp struct {
	size, modNano int64
}

// stampOf is file's stamp (zero when it cannot be read).
func stampOf(file string) fileStamp {
	fi, err := os.Stat(file)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{size: fi.Size(), modNano: fi.ModTime().UnixNano()}
}

func (r *certReloader) stampFiles() [2]fileStamp {
	return [2]fileStamp{stampOf(r.certFile), stampOf(r.keyFile)}
}

func (r *certReloader) getServer(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.get(), nil
}

func (r *certReloader) getClient(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.get(), nil
}

// get returns the pair in use, loading the files again first if they
// changed.
func (r *certReloader) get() *tls.Certificate {
	st := r.stampFiles()
	r.mu.Lock()
	if st == r.stamp {
		defer r.mu.Unlock()
		return r.cert
	}
	r.stamp = st
	loaded, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err == nil {
		r.cert = &loaded
	}
	cert := r.cert
	r.mu.Unlock()
	// Logged once per change of the files, as poolReloader does.
	if err != nil {
		r.log.failed(r.name+" did not reload; the previous one is still in use",
			zap.String("cert_file", r.certFile), zap.String("key_file", r.keyFile), zap.Error(err))
	} else {
		r.log.reloaded(r.name+" reloaded",
			zap.String("cert_file", r.certFile), zap.String("key_file", r.keyFile))
	}
	return cert
}
