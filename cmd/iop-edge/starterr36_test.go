package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/testcert"
	"github.com/iop-gateway/iop/internal/testproc"
)

// runEdgeToExit runs the edge binary on a config that must not start and
// returns its output; it fails unless the exit code is want.
func runEdgeToExit(t *testing.T, bin string, want int, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = gatewayProcAttr()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != want {
		t.Fatalf("iop-edge %v: %v, want exit %d\n%s", args, err, want, out)
	}
	return string(out)
}

// A node-listener TLS file that does not load stops the start with one
// line naming its config key (listen.tls.*) and its path, exit 1, where
// the line named neither ("nodewire: tls key pair: open …").
func TestStartNamesTheTLSFileKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildEdge(t)
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "ca")
	cert, key := ca.Issue(t, "edge", true)
	otherCert, _ := ca.Issue(t, "other", true)
	missing := filepath.Join(dir, "missing.pem")
	cases := []struct {
		name                string
		cert, key, clientCA string
		wantKeys            []string
		wantFiles           []string
	}{
		{"cert missing", missing, key, "", []string{"listen.tls.cert_file"}, []string{missing}},
		{"key missing", cert, missing, "", []string{"listen.tls.key_file"}, []string{missing}},
		{"key not the cert's", otherCert, key, "", []string{"listen.tls.cert_file", "listen.tls.key_file"}, []string{otherCert, key}},
		{"client CA missing", cert, key, missing, []string{"listen.tls.client_ca_file"}, []string{missing}},
		{"client CA no PEM", cert, key, filepath.Join(dir, "empty.pem"), []string{"listen.tls.client_ca_file"}, []string{filepath.Join(dir, "empty.pem")}},
	}
	if err := os.WriteFile(filepath.Join(dir, "empty.pem"), []byte("not pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "edge.yaml")
			body := fmt.Sprintf("listen: {http: %q, node: %q, tls: {cert_file: %q, key_file: %q, client_ca_file: %q}}\n",
				freeAddr(t), freeAddr(t), c.cert, c.key, c.clientCA)
			if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			out := runEdgeToExit(t, bin, 1, "--config", cfg)
			wants := []string{fmt.Sprintf(`"config":%q`, cfg)}
			for _, k := range c.wantKeys {
				wants = append(wants, fmt.Sprintf("%q", k))
			}
			for _, f := range c.wantFiles {
				wants = append(wants, fmt.Sprintf("%q", f))
			}
			testproc.OneStartLine(t, out, wants...)
			if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, "BEGIN") {
				t.Errorf("a file's content in the output:\n%s", out)
			}
		})
	}
}

// A listen address another process holds stops the start with one line
// naming the key (listen.http or listen.node) and the way out, exit 1.
func TestStartNamesTheListenKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildEdge(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, key := range []string{"listen.http", "listen.node"} {
		t.Run(key, func(t *testing.T) {
			http, node := freeAddr(t), freeAddr(t)
			if key == "listen.http" {
				http = taken.Addr().String()
			} else {
				node = taken.Addr().String()
			}
			cfg := filepath.Join(t.TempDir(), "edge.yaml")
			if err := os.WriteFile(cfg, []byte(fmt.Sprintf("listen: {http: %q, node: %q}\n", http, node)), 0o600); err != nil {
				t.Fatal(err)
			}
			out := runEdgeToExit(t, bin, 1, "--config", cfg)
			testproc.OneStartLine(t, out, fmt.Sprintf(`"keys":[%q]`, key), `"fix":"another process listens there`)
		})
	}
}

// A config that is not YAML reads "config: FILE: line N: …" at start
// (exit 1) and from --check-config (exit 2), not viper's "While parsing
// config: yaml: …".
func TestYAMLSyntaxErrorNamesFileAndLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildEdge(t)
	cfg := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(cfg, []byte("listen:\n  http: 127.0.0.1:0\n  node: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := "config: " + cfg + ": line 3: "
	for _, run := range []struct {
		code int
		args []string
	}{{1, []string{"--config", cfg}}, {2, []string{"--check-config", cfg}}} {
		out := runEdgeToExit(t, bin, run.code, run.args...)
		if !strings.HasPrefix(out, want) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("iop-edge %v: want one line starting %q, got:\n%s", run.args, want, out)
		}
	}
}
