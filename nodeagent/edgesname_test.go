package nodeagent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// writeNameOnlyCert writes a CA and a server certificate for edge.test
// alone (no IP address in it) into dir.
func writeNameOnlyCert(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	write := func(name, typ string, der []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "name-only CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "edge.test"}, DNSNames: []string{"edge.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", der), write("key.pem", "PRIVATE KEY", keyDER)
}

// An edge named by DNS is dialled at the addresses the name resolves to,
// and its TLS certificate is verified against the name the operator
// wrote, not the address: a certificate naming only edge.test is good.
func TestEdgeByNameVerifiesTheNameNotTheAddress(t *testing.T) {
	caFile, certFile, keyFile := writeNameOnlyCert(t, t.TempDir())
	stls, err := nodewire.ServerTLSConfig(certFile, keyFile, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fe := &fakeEdge{addr: ln.Addr().String(), payload: mockPayload(1),
		script: func(int) iop.RejectCode { return iop.RejectCode_REJECT_CODE_UNSPECIFIED },
		conns:  make(chan *nodewire.Conn, 64), ready: map[*nodewire.Conn]bool{}}
	fe.srv = nodewire.NewServer(nodewire.ServerConfig{Handler: fe, TLS: stls, HandshakeTimeout: 5 * time.Second})
	served := make(chan struct{})
	// Owner: the test; stops at srv.Close in Cleanup.
	go func() { defer close(served); _ = fe.srv.Serve(ln) }()
	t.Cleanup(func() { _ = fe.srv.Close(); <-served })

	_, port, _ := net.SplitHostPort(fe.addr)
	stubDNS(t, func(int) ([]string, error) { return []string{"127.0.0.1"}, nil })
	ctls, err := nodewire.NewClientTLS(caFile, "", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := dnsPolicy(0)
	cfg.Dial.TLS = ctls
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// Owner: the test; stops at cancel below.
	go func() {
		done <- RunEdges(ctx, cfg, []string{net.JoinHostPort("edge.test", port)}, true, newTestAgent(t), zap.NewNop())
	}()
	fe.nextReady(t)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}
