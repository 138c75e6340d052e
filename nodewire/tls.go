package nodewire

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"go.uber.org/zap"
)

// ServerTLSConfig builds the Edge listener's TLS config. clientCAFile, when
// set, turns on mutual TLS: Nodes must present a certificate it signed.
// The key pair and the client CA are loaded again when their files change
// (see certReloader, poolReloader); a reload that fails is logged with log
// (nil: not logged) and leaves the previous one in use. With mutual TLS,
// handshakes use copies of the returned config: change it before it is
// used, or not at all.
func ServerTLSConfig(certFile, keyFile, clientCAFile string, log *zap.Logger) (*tls.Config, error) {
	log = orNop(log)
	r, err := newCertReloader(certFile, keyFile, "node listener: tls key pair", log)
	if err != nil {
		return nil, pairError(err, certFile, keyFile, "nodewire: tls key pair")
	}
	cfg := &tls.Config{GetCertificate: r.getServer, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pr, err := newPoolReloader(clientCAFile, "node listener: client CA", "client_ca_file", log)
		if err != nil {
			return nil, &TLSFileError{Fields: []string{"client_ca_file"}, Files: []string{clientCAFile}, Err: err}
		}
		cfg.ClientCAs = pr.pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		// The config a handshake uses: cfg with the CA pool of the moment
		// (rebuilt only when the pool changes).
		ca := &caReloader{pools: pr, base: cfg.Clone(), cfg: cfg.Clone(), cfgPool: pr.pool}
		cfg.GetConfigForClient = ca.get
	}
	return cfg, nil
}

// ClientTLS is a Node's TLS toward its Edges. Its key pair and the CA
// that verifies the Edge are loaded again when their files change, as the
// Edge's are: a client certificate renewed in place is presented, and a
// CA rotated in place trusted, from the next dial on. A crypto/tls client
// config has no callback for its roots, so each dial takes a config of
// the moment (config) rather than one fixed config.
type ClientTLS struct {
	base  *tls.Config   // never changed after NewClientTLS; its RootCAs are the pool at build
	roots *poolReloader // nil: the system roots
}

// NewClientTLS builds a Node's TLS. caFile empty means the system roots;
// serverName empty means the name dialled (DialConfig); certFile/keyFile
// set present a client certificate (mutual TLS). A reload that fails is
// logged with log (nil: not logged) and leaves the previous one in use.
func NewClientTLS(caFile, serverName, certFile, keyFile string, log *zap.Logger) (*ClientTLS, error) {
	log = orNop(log)
	c := &ClientTLS{base: &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}}
	if caFile != "" {
		pr, err := newPoolReloader(caFile, "edge dialer: CA", "ca_file", log)
		if err != nil {
			return nil, &TLSFileError{Fields: []string{"ca_file"}, Files: []string{caFile}, Err: err}
		}
		c.base.RootCAs = pr.pool
		c.roots = pr
	}
	if certFile != "" || keyFile != "" {
		r, err := newCertReloader(certFile, keyFile, "edge dialer: tls client key pair", log)
		if err != nil {
			return nil, pairError(err, certFile, keyFile, "nodewire: tls client key pair")
		}
		c.base.GetClientCertificate = r.getClient
	}
	return c, nil
}

// TLSFileError is a TLS file that did not load when the config was built
// (ServerTLSConfig, NewClientTLS): Fields are the config keys' last parts
// ("cert_file", "key_file", "client_ca_file", "ca_file"; both of a pair
// whose key is not its certificate's), Files the paths they name, in the
// same order. The caller, who knows the keys' parent, names them in full.
// Never holds a file's content: crypto/tls's parse errors quote none.
type TLSFileError struct {
	Fields []string
	Files  []string
	Err    error
}

func (e *TLSFileError) Error() string { return e.Err.Error() }

func (e *TLSFileError) Unwrap() error { return e.Err }

// pairError is a key pair's load failure as a *TLSFileError: a file that
// could not be read (*fs.PathError, its path) is named alone, unless
// both keys name it (one PEM holding both); a parse or match failure
// names both, as crypto/tls does not say which it was.
// what prefixes err.
func pairError(err error, certFile, keyFile, what string) error {
	err = fmt.Errorf("%s: %w", what, err)
	var pe *fs.PathError
	if errors.As(err, &pe) && certFile != keyFile { // one file for both: both keys name it
		switch pe.Path {
		case certFile:
			return &TLSFileError{Fields: []string{"cert_file"}, Files: []string{certFile}, Err: err}
		case keyFile:
			return &TLSFileError{Fields: []string{"key_file"}, Files: []string{keyFile}, Err: err}
		}
	}
	return &TLSFileError{Fields: []string{"cert_file", "key_file"}, Files: []string{certFile, keyFile}, Err: err}
}

// config is the config for one dial: the CA pool of the moment, and
// serverName verified when NewClientTLS was given none. The result is
// the shared base when nothing differs from it; callers do not change it.
func (c *ClientTLS) config(serverName string) *tls.Config {
	cfg := c.base
	var pool *x509.CertPool
	if c.roots != nil {
		pool = c.roots.get()
	}
	if (c.roots == nil || pool == cfg.RootCAs) && (cfg.ServerName != "" || serverName == "") {
		return cfg
	}
	cfg = cfg.Clone()
	if c.roots != nil {
		cfg.RootCAs = pool
	}
	if cfg.ServerName == "" {
		cfg.ServerName = serverName
	}
	return cfg
}

func orNop(log *zap.Logger) *zap.Logger {
	if log == nil {
		return zap.NewNop()
	}
	return log
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
	log   *zap.Logger

	mu    sync.Mutex
	pool  *x509.CertPool // guarded by mu: the pool in use
	stamp fileStamp      // guarded by mu: the file when last loaded, or last failed to load
}

func newPoolReloader(file, name, field string, log *zap.Logger) (*poolReloader, error) {
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
		r.log.Warn(r.name+" did not reload; the previous one is still trusted",
			zap.String(r.field, r.file), zap.Error(err))
	} else {
		r.log.Info(r.name+" reloaded", zap.String(r.field, r.file))
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
	log               *zap.Logger

	mu    sync.Mutex
	cert  *tls.Certificate // guarded by mu: the pair served
	stamp [2]fileStamp     // guarded by mu: the files when last loaded, or last failed to load
}

func newCertReloader(certFile, keyFile, name string, log *zap.Logger) (*certReloader, error) {
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
		r.log.Warn(r.name+" did not reload; the previous one is still in use",
			zap.String("cert_file", r.certFile), zap.String("key_file", r.keyFile), zap.Error(err))
	} else {
		r.log.Info(r.name+" reloaded",
			zap.String("cert_file", r.certFile), zap.String("key_file", r.keyFile))
	}
	return cert
}
