package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcert"
	"github.com/iop-gateway/iop/internal/testproc"
)

// An edge.tls file that does not load, or a store_dir / workspace_root
// that cannot be created, stops the start with one line naming the key
// and the path, exit 1; the TLS line used to be "tls config" naming
// neither.
func TestStartNamesTheKey(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "ca")
	cert, key := ca.Issue(t, "node", false)
	otherCert, _ := ca.Issue(t, "other", false)
	missing := filepath.Join(dir, "missing.pem")
	// A regular file where a directory's parent should be: not creatable,
	// also for root.
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	below := filepath.Join(blocker, "sub")
	type tlsFiles struct{ ca, cert, key string }
	cases := []struct {
		name      string
		tls       *tlsFiles
		store, ws string
		wantKeys  []string
		wantFiles []string
	}{
		{"ca missing", &tlsFiles{ca: missing}, "", "", []string{"edge.tls.ca_file"}, []string{missing}},
		{"cert missing", &tlsFiles{ca: ca.File, cert: missing, key: key}, "", "", []string{"edge.tls.cert_file"}, []string{missing}},
		{"key missing", &tlsFiles{ca: ca.File, cert: cert, key: missing}, "", "", []string{"edge.tls.key_file"}, []string{missing}},
		{"key not the cert's", &tlsFiles{ca: ca.File, cert: otherCert, key: key}, "", "", []string{"edge.tls.cert_file", "edge.tls.key_file"}, []string{otherCert, key}},
		{"store_dir", nil, below, "", []string{"store_dir"}, []string{below}},
		{"workspace_root", nil, "", below, []string{"workspace_root"}, []string{below}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			store, ws := filepath.Join(tmp, "store"), filepath.Join(tmp, "ws")
			if c.store != "" {
				store = c.store
			}
			if c.ws != "" {
				ws = c.ws
			}
			body := "edge:\n  address: " + closedAddr(t) + "\n"
			if c.tls != nil {
				body += fmt.Sprintf("  tls: {enabled: true, ca_file: %q, cert_file: %q, key_file: %q}\n", c.tls.ca, c.tls.cert, c.tls.key)
			}
			body += fmt.Sprintf("node: {id: n1, token: tok}\nreconnect: {interval_sec: 0.05, max_attempts: 1}\nstore_dir: %q\nworkspace_root: %q\n", store, ws)
			cfg := writeConfig(t, body)
			code, out := runNode(t, 30*time.Second, nil, "--config", cfg)
			if code != 1 {
				t.Fatalf("exit %d, want 1\n%s", code, out)
			}
			wants := []string{fmt.Sprintf(`"config":%q`, cfg), `"fix":`}
			for _, k := range c.wantKeys {
				wants = append(wants, fmt.Sprintf("%q", k))
			}
			for _, f := range c.wantFiles {
				wants = append(wants, fmt.Sprintf("%q", f))
			}
			testproc.OneStartLine(t, out, wants...)
			if strings.Contains(out, "BEGIN") {
				t.Errorf("a file's content in the output:\n%s", out)
			}
		})
	}
}

// A config that is not YAML reads "config: FILE: line N: …" at start
// (exit 1) and from --check-config (exit 2).
func TestYAMLSyntaxErrorNamesFileAndLine(t *testing.T) {
	cfg := writeConfig(t, "edge:\n  address: 127.0.0.1:1\nnode: {id: n1, token: tok\nstore_dir: x\n")
	want := "config: " + cfg + ": line "
	for _, run := range []struct {
		code int
		args []string
	}{{1, []string{"--config", cfg}}, {2, []string{"--check-config", cfg}}} {
		code, out := runNode(t, 30*time.Second, nil, run.args...)
		if code != run.code || !strings.HasPrefix(out, want) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("iop-node %v: exit %d, want %d and one line starting %q, got:\n%s", run.args, code, run.code, want, out)
		}
	}
}
