package nodeagent

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/internal/testcert"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node that dials its edge by a DNS name over TLS verifies that name
// and trusts the edge's CA rotated in place from its next dial, as a node
// dialling an address does: the name verified comes with each dial, and
// the CA pool of the moment with it. (The name once went into a copy of
// the TLS config, which the CA reload did not reach: such a node could
// not reconnect after a rotation until it was restarted.)
func TestEdgeByNameOverTLSTrustsRotatedCA(t *testing.T) {
	dir, nodeDir := t.TempDir(), t.TempDir()
	edgeCA := testcert.NewCA(t, dir, "edge")
	issuedCert, issuedKey := edgeCA.Issue(t, "edge", true)
	srvCert, srvKey := filepath.Join(dir, "served.pem"), filepath.Join(dir, "served-key.pem")
	caFile := filepath.Join(nodeDir, "edge-ca.pem")
	now := time.Now()
	testcert.InstallAt(t, srvCert, issuedCert, now)
	testcert.InstallAt(t, srvKey, issuedKey, now)
	testcert.InstallAt(t, caFile, edgeCA.File, now)

	fe, stop := startEdgeByNameOverTLS(t, srvCert, srvKey, caFile)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("RunEdges after shutdown = %v, want nil", err)
		}
	}()
	first := fe.nextReady(t)

	// The edge's certificate reissued by a new CA, and the node's CA file
	// rewritten in place; the session then drops.
	nextCA := testcert.NewCA(t, t.TempDir(), "edge-next")
	nextCert, nextKey := nextCA.Issue(t, "edge", true)
	later := now.Add(time.Minute)
	testcert.InstallAt(t, srvCert, nextCert, later)
	testcert.InstallAt(t, srvKey, nextKey, later)
	testcert.InstallAt(t, caFile, nextCA.File, later)
	_ = first.Close()
	fe.nextReady(t)
}

// startEdgeByNameOverTLS serves a fake edge with the TLS pair certFile and
// keyFile on loopback, and runs a node dialling it by the name edge.test
// (resolved to 127.0.0.1), trusting caFile. stop shuts the node down and
// returns what RunEdges returned; Cleanup closes the edge.
func startEdgeByNameOverTLS(t *testing.T, certFile, keyFile, caFile string) (fe *fakeEdge, stop func() error) {
	t.Helper()
	stls, err := nodewire.ServerTLSConfig(certFile, keyFile, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fe = &fakeEdge{addr: ln.Addr().String(), payload: mockPayload(1),
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
	// Owner: the test; stops at cancel, which stop calls.
	go func() {
		done <- RunEdges(ctx, cfg, []string{net.JoinHostPort("edge.test", port)}, true, newTestAgent(t), zap.NewNop())
	}()
	return fe, func() error { cancel(); return <-done }
}
