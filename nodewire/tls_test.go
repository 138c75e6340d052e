package nodewire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/iop-gateway/iop/internal/testcert"
)

func serverTLS(t *testing.T, certFile, keyFile, clientCA string) *tls.Config {
	t.Helper()
	cfg, err := ServerTLSConfig(certFile, keyFile, clientCA, nil)
	if err != nil {
		t.Fatalf("ServerTLSConfig: %v", err)
	}
	return cfg
}

func clientTLS(t *testing.T, caFile, serverName, certFile, keyFile string) *ClientTLS {
	t.Helper()
	c, err := NewClientTLS(caFile, serverName, certFile, keyFile, nil)
	if err != nil {
		t.Fatalf("NewClientTLS: %v", err)
	}
	return c
}

func dialErr(addr string, tcfg *ClientTLS) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cc, _, err := Dial(ctx, DialConfig{Address: addr, TLS: tcfg}, testRegisterRequest("node-1"))
	if err == nil {
		_ = cc.Close()
	}
	return err
}

func TestTLSHandshake(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "edge")
	certFile, keyFile := ca.Issue(t, "edge", true)
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{TLS: serverTLS(t, certFile, keyFile, "")})

	for _, tc := range []struct{ name, serverName string }{
		{"explicit server name", "edge.test"},
		// Empty server_name verifies the host of the dialed address, as
		// crypto/tls.Dial does.
		{"server name from address", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, resp, err := Dial(context.Background(), DialConfig{Address: ts.addr, TLS: clientTLS(t, ca.File, tc.serverName, "", "")}, testRegisterRequest("node-1"))
			if err != nil {
				t.Fatalf("Dial over TLS: %v", err)
			}
			defer cc.Close()
			if !resp.GetAccepted() {
				t.Fatalf("RegisterResponse %v", resp)
			}
			sc := recvConn(t, h.registered, "Register")
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			if err := cc.Ready(ctx, "node-1"); err != nil {
				t.Fatalf("Ready: %v", err)
			}
			recvConn(t, h.readied, "Ready")
			tc, ok := cc.raw.(*tls.Conn)
			if !ok {
				t.Fatalf("client transport is %T, want *tls.Conn", cc.raw)
			}
			if st := tc.ConnectionState(); !st.HandshakeComplete || st.Version < tls.VersionTLS12 {
				t.Fatalf("TLS state: complete %v, version %x", st.HandshakeComplete, st.Version)
			}
			if _, ok := sc.raw.(*tls.Conn); !ok {
				t.Fatalf("server transport is %T, want *tls.Conn", sc.raw)
			}
			waitFor(t, "heartbeats over TLS", func() bool {
				return cc.Stats().HeartbeatsReceived >= 2 && sc.Stats().HeartbeatsReceived >= 2
			})
			_ = cc.Close()
			recvClosed(t, h)
		})
	}
}

func TestTLSWrongCA(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "edge")
	other := testcert.NewCA(t, dir, "other")
	certFile, keyFile := ca.Issue(t, "edge", true)
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{TLS: serverTLS(t, certFile, keyFile, "")})

	err := dialErr(ts.addr, clientTLS(t, other.File, "edge.test", "", ""))
	if err == nil {
		t.Fatal("Dial trusted a server certificate from an unknown CA")
	}
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("Dial error %v, want x509.UnknownAuthorityError", err)
	}
	// The right CA with the wrong name fails too.
	err = dialErr(ts.addr, clientTLS(t, ca.File, "not-edge.test", "", ""))
	var host x509.HostnameError
	if !errors.As(err, &host) {
		t.Fatalf("Dial with a wrong server name: %v, want x509.HostnameError", err)
	}
	// A plain-TCP Node talking to a TLS Edge is dropped.
	if err := dialErr(ts.addr, nil); err == nil {
		t.Fatal("plain Dial to a TLS server succeeded")
	}
	ts.close(t)
	if regs, readies, closed := h.counts(); regs+readies+closed != 0 {
		t.Fatalf("handler called for failed TLS handshakes: Register %d, Ready %d, Closed %d", regs, readies, closed)
	}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "edge")
	nodeCA := testcert.NewCA(t, dir, "nodes")
	rogueCA := testcert.NewCA(t, dir, "rogue")
	certFile, keyFile := ca.Issue(t, "edge", true)
	nodeCert, nodeKey := nodeCA.Issue(t, "node-1", false)
	rogueCert, rogueKey := rogueCA.Issue(t, "node-1", false)

	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{TLS: serverTLS(t, certFile, keyFile, nodeCA.File)})

	if err := dialErr(ts.addr, clientTLS(t, ca.File, "edge.test", "", "")); err == nil {
		t.Fatal("mutual TLS accepted a Node without a client certificate")
	}
	if err := dialErr(ts.addr, clientTLS(t, ca.File, "edge.test", rogueCert, rogueKey)); err == nil {
		t.Fatal("mutual TLS accepted a client certificate from another CA")
	}
	if regs, _, _ := h.counts(); regs != 0 {
		t.Fatalf("Register called %d times for rejected client certificates", regs)
	}

	cc, _, err := Dial(context.Background(), DialConfig{Address: ts.addr, TLS: clientTLS(t, ca.File, "edge.test", nodeCert, nodeKey)}, testRegisterRequest("node-1"))
	if err != nil {
		t.Fatalf("Dial with a client certificate: %v", err)
	}
	defer cc.Close()
	sc := recvConn(t, h.registered, "Register")
	peer := sc.raw.(*tls.Conn).ConnectionState().PeerCertificates
	if len(peer) == 0 || peer[0].Subject.CommonName != "node-1" {
		t.Fatalf("server saw client certificates %v", peer)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := cc.Ready(ctx, "node-1"); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "edge")
	certFile, keyFile := ca.Issue(t, "edge", true)
	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := ServerTLSConfig(missing, keyFile, "", nil); err == nil {
		t.Error("ServerTLSConfig with a missing cert file succeeded")
	}
	if _, err := ServerTLSConfig(certFile, certFile, "", nil); err == nil {
		t.Error("ServerTLSConfig with a certificate as key succeeded")
	}
	if _, err := ServerTLSConfig(certFile, keyFile, missing, nil); err == nil {
		t.Error("ServerTLSConfig with a missing client CA succeeded")
	}
	if _, err := ServerTLSConfig(certFile, keyFile, notPEM, nil); err == nil {
		t.Error("ServerTLSConfig with a non-PEM client CA succeeded")
	}
	cfg, err := ServerTLSConfig(certFile, keyFile, ca.File, nil)
	if err != nil || cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil || cfg.MinVersion < tls.VersionTLS12 {
		t.Errorf("ServerTLSConfig with client CA: %+v, %v", cfg, err)
	}
	cfg, err = ServerTLSConfig(certFile, keyFile, "", nil)
	if err != nil || cfg.ClientAuth != tls.NoClientCert {
		t.Errorf("ServerTLSConfig without client CA: ClientAuth %v, %v", cfg.ClientAuth, err)
	}

	if _, err := NewClientTLS(missing, "", "", "", nil); err == nil {
		t.Error("NewClientTLS with a missing CA succeeded")
	}
	if _, err := NewClientTLS(notPEM, "", "", "", nil); err == nil {
		t.Error("NewClientTLS with a non-PEM CA succeeded")
	}
	if _, err := NewClientTLS("", "", certFile, "", nil); err == nil {
		t.Error("NewClientTLS with a cert but no key succeeded")
	}
	c, err := NewClientTLS("", "edge.test", "", "", nil)
	if err != nil {
		t.Fatalf("NewClientTLS with system roots: %v", err)
	}
	if got := c.config("other.test"); got.RootCAs != nil || got.ServerName != "edge.test" || got.GetClientCertificate != nil {
		t.Errorf("NewClientTLS with system roots: %+v", got)
	}
}
