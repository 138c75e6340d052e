package nodewire

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/testcert"
)

// A key pair that does not load says whose it is before crypto/tls's own
// words: the node listener's ("nodewire: tls key pair: ") or the edge
// dialer's client pair ("nodewire: tls client key pair: "), the two
// lines an operator reads when both binaries log a start failure.
func TestTLSPairErrorSaysWhose37m(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "ca")
	cert, _ := ca.Issue(t, "edge", true)
	missing := filepath.Join(dir, "missing.pem")
	if _, err := ServerTLSConfig(cert, missing, "", nil); err == nil || !strings.HasPrefix(err.Error(), "nodewire: tls key pair: ") {
		t.Errorf("server pair: %v, want it to begin %q", err, "nodewire: tls key pair: ")
	}
	if _, err := NewClientTLS(ca.File, "", cert, missing, nil); err == nil || !strings.HasPrefix(err.Error(), "nodewire: tls client key pair: ") {
		t.Errorf("client pair: %v, want it to begin %q", err, "nodewire: tls client key pair: ")
	}
}
