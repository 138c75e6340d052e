package nodeagent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	fe, stop := startEdgeByNameOverTLS(t, certFile, keyFile, caFile)
	fe.nextReady(t)
	if err := stop(); err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}
