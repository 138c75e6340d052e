package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/testcert"
)

// CheckFiles loads the TLS files as the start does, naming the key of each
// that fails; --check-config used to answer "ok" for all of these, and the
// start then failed with an error that named no key.
func TestCheckFilesTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "ca")
	cert, key := ca.Issue(t, "edge", true)
	_, otherKey := ca.Issue(t, "other", true)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name              string
		cert, key, caFile string
		want              string // "" = no problem
	}{
		{"good pair, good CA", cert, key, cert, ""},
		{"missing cert", missing, key, "", `listen.tls.cert_file: "` + missing + `" does not exist`},
		{"missing key", cert, missing, "", `listen.tls.key_file: "` + missing + `" does not exist`},
		{"key not pem", cert, garbage, "", "listen.tls.cert_file, key_file: not a usable key pair"},
		{"key of another cert", cert, otherKey, "", "listen.tls.cert_file, key_file: not a usable key pair"},
		{"CA not pem", cert, key, garbage, `listen.tls.client_ca_file: "` + garbage + `" holds no PEM certificate`},
		{"CA missing", cert, key, missing, `listen.tls.client_ca_file: "` + missing + `" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Edge{}
			e.Listen.TLS = ServerTLS{CertFile: tc.cert, KeyFile: tc.key, ClientCAFile: tc.caFile}
			checkFilesResult(t, e.CheckFiles("edge.yaml"), tc.want)

			n := &Node{}
			n.Edge.TLS = ClientTLS{Enabled: true, CertFile: tc.cert, KeyFile: tc.key, CAFile: tc.caFile}
			checkFilesResult(t, n.CheckFiles("node.yaml"), strings.ReplaceAll(strings.ReplaceAll(tc.want, "listen.tls.client_ca_file", "edge.tls.ca_file"), "listen.tls", "edge.tls"))
		})
	}
}

func checkFilesResult(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("CheckFiles: %v, want none", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckFiles: %v, want a problem containing %q", err, want)
	}
}
