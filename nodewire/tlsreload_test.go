package nodewire

import (
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcert"
)

// servedSerial dials addr over TLS and returns the serial number of the
// certificate the edge presented.
func servedSerial(t *testing.T, addr string, tcfg *tls.Config) *big.Int {
	t.Helper()
	tcfg = tcfg.Clone()
	var serial *big.Int
	tcfg.VerifyConnection = func(cs tls.ConnectionState) error {
		serial = cs.PeerCertificates[0].SerialNumber
		return nil
	}
	if err := dialErr(addr, tcfg); err != nil {
		t.Fatalf("dial over TLS: %v", err)
	}
	return serial
}

func serialOf(t *testing.T, certFile string) *big.Int {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, certFile[:len(certFile)-len(".pem")]+"-key.pem")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber
}

// A certificate renewed in place (same files, new contents) is served from
// the next handshake on, without a restart; a pair that does not load
// (the certificate written, its key not yet) leaves the previous one
// served.
func TestServerCertificateRenewedInPlace(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "edge")
	certFile, keyFile := ca.Issue(t, "edge", true)
	first := serialOf(t, certFile)
	ts := startServer(t, newFakeHandler(), ServerConfig{TLS: serverTLS(t, certFile, keyFile, "")})
	client := clientTLS(t, ca.File, "edge.test", "", "")
	if got := servedSerial(t, ts.addr, client); got.Cmp(first) != 0 {
		t.Fatalf("served serial %v, want %v", got, first)
	}

	// Renewed: both files rewritten. Their modification time is moved on
	// explicitly, so a coarse file system clock cannot hide the change.
	ca.Issue(t, "edge", true)
	renewed := serialOf(t, certFile)
	later := time.Now().Add(time.Minute)
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := servedSerial(t, ts.addr, client); got.Cmp(renewed) != 0 {
		t.Fatalf("after renewal served serial %v, want the renewed %v", got, renewed)
	}

	// Half written: the key is not the certificate's. The renewed pair
	// stays in use.
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ca.Issue(t, "edge", true)
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	later = later.Add(time.Minute)
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := servedSerial(t, ts.addr, client); got.Cmp(renewed) != 0 {
		t.Fatalf("with a mismatched pair served serial %v, want the previous %v", got, renewed)
	}
}

// A client CA rotated in place (same file, a new CA's certificate) is
// trusted from the next handshake on, and the old one no longer is; a file
// that does not load leaves the rotated CA in use.
func TestClientCARotatedInPlace(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "edge")
	certFile, keyFile := ca.Issue(t, "edge", true)
	oldCA := testcert.NewCA(t, dir, "nodes")
	newCA := testcert.NewCA(t, t.TempDir(), "nodes-next")
	oldCert, oldKey := oldCA.Issue(t, "node-1", false)
	newCert, newKey := newCA.Issue(t, "node-1", false)
	caFile := filepath.Join(dir, "client-ca.pem")
	install := func(src string, at time.Time) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(caFile, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(caFile, at, at); err != nil {
			t.Fatal(err)
		}
	}
	install(oldCA.File, time.Now())
	ts := startServer(t, newFakeHandler(), ServerConfig{TLS: serverTLS(t, certFile, keyFile, caFile)})
	withOld := clientTLS(t, ca.File, "edge.test", oldCert, oldKey)
	withNew := clientTLS(t, ca.File, "edge.test", newCert, newKey)
	if err := dialErr(ts.addr, withOld); err != nil {
		t.Fatalf("a node of the configured CA: %v", err)
	}
	if err := dialErr(ts.addr, withNew); err == nil {
		t.Fatal("a node of a CA not yet configured was accepted")
	}

	later := time.Now().Add(time.Minute)
	install(newCA.File, later)
	if err := dialErr(ts.addr, withNew); err != nil {
		t.Fatalf("after the rotation, a node of the new CA: %v", err)
	}
	if err := dialErr(ts.addr, withOld); err == nil {
		t.Fatal("after the rotation, a node of the old CA was still accepted")
	}

	// Half written: no PEM certificate in it. The new CA stays in use.
	if err := os.WriteFile(caFile, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	later = later.Add(time.Minute)
	if err := os.Chtimes(caFile, later, later); err != nil {
		t.Fatal(err)
	}
	if err := dialErr(ts.addr, withNew); err != nil {
		t.Fatalf("with an unreadable CA file, a node of the new CA: %v", err)
	}
}
