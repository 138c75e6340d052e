package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
)

// checkKeyPair adds a problem when the key pair in certFile and keyFile
// does not load as the node wire will load it at start (a missing or
// unreadable file, no PEM, a key that is not the certificate's):
// --check-config said "ok" to such a config, and the binary then failed
// at start with an error that named no key. prefix is the keys' parent
// ("listen.tls"). A file missing is named by its own key; a pair that
// does not match, by both.
func checkKeyPair(p *problems, prefix, certFile, keyFile string) {
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		p.add("%s: %s", prefix+"."+fileKey(err, certFile, keyFile, "cert_file", "key_file"), fileErr(err))
	}
}

// checkCAFile adds a problem when file holds no PEM certificate to trust,
// as the node wire would refuse it at start. key is its config key.
func checkCAFile(p *problems, key, file string) {
	pem, err := os.ReadFile(file)
	if err != nil {
		p.add("%s: %s", key, fileErr(err))
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		p.add("%s: %s holds no PEM certificate", key, quoteSafe(file))
	}
}

// fileKey names the key whose file err is about: certKey or keyKey for a
// file that could not be read, both for a pair that does not load.
func fileKey(err error, certFile, keyFile, certKey, keyKey string) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		switch pe.Path {
		case certFile:
			return certKey
		case keyFile:
			return keyKey
		}
	}
	return certKey + ", " + keyKey
}

// fileErr is err for a problem line: a file that cannot be read says so
// in words, with its path (paths hold no credentials; the key's content
// is never quoted, and crypto/tls's parse errors do not quote it).
func fileErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return quoteSafe(pe.Path) + " does not exist"
		case errors.Is(err, fs.ErrPermission):
			return quoteSafe(pe.Path) + " cannot be read (permission denied)"
		}
		return quoteSafe(pe.Path) + " cannot be read: " + pe.Err.Error()
	}
	return "not a usable key pair: " + err.Error()
}

// CheckFiles loads the TLS files the config names as the edge will at
// start (listen.tls.*), naming each that fails; file is the config's,
// for the error. Only --check-config runs
// it: validation proper does not open files, so a reload during a
// certificate's renewal in place (written, its key not yet) is not
// refused for it, and the start reads each file once.
func (c *Edge) CheckFiles(file string) error {
	var p problems
	if t := c.Listen.TLS; t.CertFile != "" && t.KeyFile != "" {
		checkKeyPair(&p, "listen.tls", t.CertFile, t.KeyFile)
		if t.ClientCAFile != "" {
			checkCAFile(&p, "listen.tls.client_ca_file", t.ClientCAFile)
		}
	}
	return p.err(file)
}

// CheckFiles loads the TLS files the config names as the node will at
// start (edge.tls.*), as Edge.CheckFiles does.
func (c *Node) CheckFiles(file string) error {
	var p problems
	if t := c.Edge.TLS; t.Enabled {
		if t.CertFile != "" && t.KeyFile != "" {
			checkKeyPair(&p, "edge.tls", t.CertFile, t.KeyFile)
		}
		if t.CAFile != "" {
			checkCAFile(&p, "edge.tls.ca_file", t.CAFile)
		}
	}
	return p.err(file)
}
