package nodewire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/internal/testcert"
)

// servedSerial dials addr over TLS and returns the serial number of the
// certificate the edge presented.
func servedSerial(t *testing.T, addr string, c *ClientTLS) *big.Int {
	t.Helper()
	base := c.base.Clone()
	var serial *big.Int
	base.VerifyConnection = func(cs tls.ConnectionState) error {
		serial = cs.PeerCertificates[0].SerialNumber
		return nil
	}
	if err := dialErr(addr, &ClientTLS{base: base, roots: c.roots}); err != nil {
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

// A key pair or client CA that fails to reload is logged once per change
// of its files, however many handshakes follow, with the file names and
// not their contents; the previous one stays in use. One that reloads is
// logged too.
func TestFailedTLSReloadIsLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "edge")
	certFile, keyFile := ca.Issue(t, "edge", true)
	nodes := testcert.NewCA(t, dir, "nodes")
	nodeCert, nodeKey := nodes.Issue(t, "node-1", false)
	caFile := filepath.Join(dir, "client-ca.pem")
	caPEM, err := os.ReadFile(nodes.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	stls, err := ServerTLSConfig(certFile, keyFile, caFile, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, newFakeHandler(), ServerConfig{TLS: stls})
	client := clientTLS(t, ca.File, "edge.test", nodeCert, nodeKey)
	first := servedSerial(t, ts.addr, client)
	touch := func(at time.Time, files ...string) {
		t.Helper()
		for _, f := range files {
			if err := os.Chtimes(f, at, at); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A key that is not the certificate's, and a CA file with no
	// certificate in it; three handshakes follow.
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ca.Issue(t, "edge", true)
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	touch(later, certFile, keyFile, caFile)
	for range 3 {
		if got := servedSerial(t, ts.addr, client); got.Cmp(first) != 0 {
			t.Fatalf("with a mismatched pair served serial %v, want the previous %v", got, first)
		}
	}
	pairFailed := logs.FilterMessageSnippet("tls key pair did not reload").AllUntimed()
	caFailed := logs.FilterMessageSnippet("client CA did not reload").AllUntimed()
	if len(pairFailed) != 1 || len(caFailed) != 1 {
		t.Fatalf("after 3 handshakes, %d key pair and %d client CA failures logged, want 1 each", len(pairFailed), len(caFailed))
	}
	for _, e := range append(pairFailed, caFailed...) {
		if e.Level != zapcore.WarnLevel {
			t.Errorf("%q logged at %v, want warn", e.Message, e.Level)
		}
		fields := e.ContextMap()
		if fields["error"] == nil {
			t.Errorf("%q logged without its error", e.Message)
		}
		for _, v := range fields {
			if s, ok := v.(string); ok && (strings.Contains(s, "PRIVATE KEY") || strings.Contains(s, string(keyPEM[40:80]))) {
				t.Errorf("%q logged key material: %q", e.Message, s)
			}
		}
	}
	if f := pairFailed[0].ContextMap(); f["cert_file"] != certFile || f["key_file"] != keyFile {
		t.Errorf("key pair failure logged with %v, want the two file names", f)
	}
	if f := caFailed[0].ContextMap(); f["client_ca_file"] != caFile {
		t.Errorf("client CA failure logged with %v, want the file name", f)
	}

	// Fixed: logged as reloaded, once.
	ca.Issue(t, "edge", true)
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	later = later.Add(time.Minute)
	touch(later, certFile, keyFile, caFile)
	for range 2 {
		if got := servedSerial(t, ts.addr, client); got.Cmp(first) == 0 {
			t.Fatal("the fixed pair was not served")
		}
	}
	if n := logs.FilterMessageSnippet("tls key pair reloaded").Len(); n != 1 {
		t.Errorf("key pair reload logged %d times, want 1", n)
	}
	if n := logs.FilterMessageSnippet("client CA reloaded").Len(); n != 1 {
		t.Errorf("client CA reload logged %d times, want 1", n)
	}
}

// A node's client certificate renewed in place is presented, and the
// edge's CA rotated in place trusted, from the next dial on, as the edge's
// own files are: a node read them once, and after a rotation it could not
// reconnect until restarted. A CA file that does not load leaves the
// previous pool in use and is logged once.
func TestNodeCredentialsRenewedInPlace(t *testing.T) {
	dir, nodeDir := t.TempDir(), t.TempDir()
	edgeCA := testcert.NewCA(t, dir, "edge")
	srvCert, srvKey := edgeCA.Issue(t, "edge", true)
	nodesCA := testcert.NewCA(t, dir, "nodes")
	issuedCert, issuedKey := nodesCA.Issue(t, "node-1", false)
	clientCA := filepath.Join(dir, "client-ca.pem")
	nodeCA := filepath.Join(nodeDir, "edge-ca.pem")
	nodeCert, nodeKey := filepath.Join(nodeDir, "node.pem"), filepath.Join(nodeDir, "node-key.pem")
	now := time.Now()
	testcert.InstallAt(t, clientCA, nodesCA.File, now)
	testcert.InstallAt(t, nodeCA, edgeCA.File, now)
	testcert.InstallAt(t, nodeCert, issuedCert, now)
	testcert.InstallAt(t, nodeKey, issuedKey, now)
	ts := startServer(t, newFakeHandler(), ServerConfig{TLS: serverTLS(t, srvCert, srvKey, clientCA)})
	core, logs := observer.New(zapcore.DebugLevel)
	client, err := NewClientTLS(nodeCA, "", nodeCert, nodeKey, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	// The name verified comes with each dial (a node resolving an edge's
	// name), not with the TLS built once.
	dial := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		cc, _, err := Dial(ctx, DialConfig{Address: ts.addr, ServerName: "edge.test", TLS: client}, testRegisterRequest("node-1"))
		if err == nil {
			_ = cc.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}

	// Both CAs rotated: the edge's certificate and the node's reissued by
	// new ones, every file rewritten in place.
	next := t.TempDir()
	nextEdgeCA := testcert.NewCA(t, next, "edge-next")
	nextSrvCert, nextSrvKey := nextEdgeCA.Issue(t, "edge", true)
	nextNodesCA := testcert.NewCA(t, next, "nodes-next")
	nextCert, nextKey := nextNodesCA.Issue(t, "node-1", false)
	later := now.Add(time.Minute)
	testcert.InstallAt(t, srvCert, nextSrvCert, later)
	testcert.InstallAt(t, srvKey, nextSrvKey, later)
	testcert.InstallAt(t, clientCA, nextNodesCA.File, later)
	testcert.InstallAt(t, nodeCA, nextEdgeCA.File, later)
	testcert.InstallAt(t, nodeCert, nextCert, later)
	testcert.InstallAt(t, nodeKey, nextKey, later)
	if err := dial(); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}

	// Half written: the node's CA file holds no certificate. The rotated
	// CA stays in use; the failure is logged once for two dials.
	if err := os.WriteFile(nodeCA, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	later = later.Add(time.Minute)
	if err := os.Chtimes(nodeCA, later, later); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := dial(); err != nil {
			t.Fatalf("with an unreadable CA file: %v", err)
		}
	}
	failed := logs.FilterMessageSnippet("edge dialer: CA did not reload").AllUntimed()
	if len(failed) != 1 {
		t.Fatalf("%d CA reload failures logged for two dials, want 1", len(failed))
	}
	if f := failed[0].ContextMap(); f["ca_file"] != nodeCA || f["error"] == nil {
		t.Errorf("CA reload failure logged with %v, want the file and the error", f)
	}
}
