package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// maxCheckFile bounds what --check-config reads of one TLS file: a PEM
// key pair or CA bundle is kilobytes (a full public-roots bundle a few
// hundred); a key_file pointed at a disk image or a log is not one.
const maxCheckFile = 8 << 20

// Why a TLS file was not read: not a regular file (a FIFO would block
// the open, and a read, until a writer came; a directory or a device is
// no PEM), or larger than maxCheckFile.
var (
	errNotRegular = errors.New("not a regular file")
	errTooLarge   = fmt.Errorf("larger than %d MiB", maxCheckFile>>20)
)

// readCheckFile reads a TLS file for --check-config, bounded: opened
// without blocking (a FIFO's open waits for a writer), refused unless a
// regular file, read up to maxCheckFile. Its errors are *fs.PathError.
func readCheckFile(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errNotRegular}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCheckFile+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if len(b) > maxCheckFile {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errTooLarge}
	}
	return b, nil
}

// checkKeyPair adds a problem when the key pair in certFile and keyFile
// does not load as the node wire will load it at start (a missing or
// unreadable file, no PEM, a key that is not the certificate's):
// --check-config said "ok" to such a config, and the binary then failed
// at start with an error that named no key. prefix is the keys' parent
// ("listen.tls"). A file missing is named by its own key; a pair that
// does not match, by both.
func checkKeyPair(p *problems, prefix, certFile, keyFile string) {
	certPEM, err := readCheckFile(certFile)
	if err != nil {
		p.add("%s: %s", prefix+".cert_file", fileErr(err))
		return
	}
	keyPEM, err := readCheckFile(keyFile)
	if err != nil {
		p.add("%s: %s", prefix+".key_file", fileErr(err))
		return
	}
	// Both files were read: crypto/tls's error says the pair does not
	// load, not which file is wrong, so both keys are named.
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		p.add("%s.cert_file, key_file: %s", prefix, fileErr(err))
	}
}

// checkCAFile adds a problem when file holds no PEM certificate to trust,
// as the node wire would refuse it at start. key is its config key.
func checkCAFile(p *problems, key, file string) {
	pem, err := readCheckFile(file)
	if err != nil {
		p.add("%s: %s", key, fileErr(err))
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		p.add("%s: %s holds no PEM certificate", key, quoteSafe(file))
	}
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
