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
// (see certReloader, caReloader). With mutual TLS, handshakes use copies
// of the returned config: change it before it is used, or not at all.
// A reload that fails is logged by the Server given the config (not a
// clone of it) as ServerConfig.TLS, with its logger.
func ServerTLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	rl := &reloadLog{}
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: rl}
	r.stamp = r.stampFiles()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("nodewire: tls key pair: %w", err)
	}
	r.cert = &cert
	cfg := &tls.Config{GetCertificate: r.get, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		ca := &caReloader{file: clientCAFile, stamp: stampOf(clientCAFile), log: rl}
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		// The config a handshake uses: cfg with the CA pool of the moment
		// (rebuilt only when the pool changes).
		ca.base, ca.cfg = cfg.Clone(), cfg.Clone()
		cfg.GetConfigForClient = ca.get
	}
	registerReloadLog(cfg, rl)
	return cfg, nil
}

// reloadLog is the logger of a ServerTLSConfig's reloaders: none until a
// Server takes the config (attachReloadLog), since the config is built
// before the server and carries no logger of its own.
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

// reloadLogs finds the reloadLog of a config ServerTLSConfig returned. It
// holds the config weakly: an entry goes when its config is collected.
var reloadLogs sync.Map // weak.Pointer[tls.Config] -> *reloadLog

func registerReloadLog(cfg *tls.Config, rl *reloadLog) {
	key := weak.Make(cfg)
	reloadLogs.Store(key, rl)
	runtime.AddCleanup(cfg, func(key weak.Pointer[tls.Config]) { reloadLogs.Delete(key) }, key)
}

// attachReloadLog has the reloaders of cfg, when ServerTLSConfig built it,
// log with log.
func attachReloadLog(cfg *tls.Config, log *zap.Logger) {
	if cfg == nil {
		return
	}
	if rl, ok := reloadLogs.Load(weak.Make(cfg)); ok {
		rl.(*reloadLog).log.Store(log)
	}
}

// caReloader serves the client CA in file, loading it again when the
// file's size or modification time changed since the last look, as
// certReloader does for the key pair: a CA rotated in place (nodes'
// certificates reissued by a new CA) is trusted from the next handshake
// on. A file that does not load leaves the previous pool in use until it
// changes again.
type caReloader struct {
	file string
	base *tls.Config // the listener's config without a GetConfigForClient; never changed
	log  *reloadLog

	mu    sync.Mutex
	cfg   *tls.Config // guarded by mu: base with the pool in use
	stamp fileStamp   // guarded by mu: the file when last loaded, or last failed to load
}

func (r *caReloader) get(*tls.ClientHelloInfo) (*tls.Config, error) {
	st := stampOf(r.file)
	r.mu.Lock()
	if st == r.stamp {
		defer r.mu.Unlock()
		return r.cfg, nil
	}
	r.stamp = st
	pool, err := loadPool(r.file)
	if err == nil {
		cfg := r.base.Clone()
		cfg.ClientCAs = pool
		r.cfg = cfg
	}
	cfg := r.cfg
	r.mu.Unlock()
	// Logged once per change of the file: the next handshake finds the
	// stamp it recorded and loads nothing.
	if err != nil {
		r.log.failed("node listener: client CA did not reload; the previous one is still trusted",
			zap.String("client_ca_file", r.file), zap.Error(err))
	} else {
		r.log.reloaded("node listener: client CA reloaded", zap.String("client_ca_file", r.file))
	}
	return cfg, nil
}

// ClientTLSConfig builds the Node dialer's TLS config. caFile empty means the
// system roots; certFile/keyFile set present a client certificate (mutual TLS).
func ClientTLSConfig(caFile, serverName, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("nodewire: tls client key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
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
// from the next handshake on, while a restart-only edge would go on serving
// the old one until it expired and every node's reconnect failed. A pair
// that does not load (the certificate written, its key not yet) leaves the
// previous one in use until the files change again. A handshake costs two
// stat calls; a load happens only on a change.
type certReloader struct {
	certFile, keyFile string
	log               *reloadLog

	mu    sync.Mutex
	cert  *tls.Certificate // guarded by mu: the pair served
	stamp [2]fileStamp     // guarded by mu: the files when last loaded, or last failed to load
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

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	st := r.stampFiles()
	r.mu.Lock()
	if st == r.stamp {
		defer r.mu.Unlock()
		return r.cert, nil
	}
	r.stamp = st
	loaded, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err == nil {
		r.cert = &loaded
	}
	cert := r.cert
	r.mu.Unlock()
	// Logged once per change of the files, as caReloader does.
	if err != nil {
		r.log.failed("node listener: tls key pair did not reload; the previous one is still served",
			zap.String("cert_file", r.certFile), zap.String("key_file", r.keyFile), zap.Error(err))
	} else {
		r.log.reloaded("node listener: tls key pair reloaded",
			zap.String("cert_file", r.certFile), zap.String("key_file", r.keyFile))
	}
	return cert, nil
}
