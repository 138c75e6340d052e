package edgeapp

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
)

// A listen address that cannot be bound fails New with a *config.StartError
// naming that key (listen.http or listen.node, not the other) and the
// way out: another process holds a taken port; an address this host does
// not have is to be changed. The binary logs these as the start's one
// line (config.StartFields).
func TestListenErrorNamesTheKeyAndTheFix37m(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	// 192.0.2.1 is TEST-NET-1 (RFC 5737): no host has it.
	for _, c := range []struct {
		key, http, node, fix string
	}{
		{"listen.http", taken.Addr().String(), "127.0.0.1:0", "another process listens there"},
		{"listen.node", "127.0.0.1:0", taken.Addr().String(), "another process listens there"},
		{"listen.http", "192.0.2.1:0", "127.0.0.1:0", "to an address of this host that is free to bind"},
	} {
		_, cfg := edgeFile(t, "listen: {http: '"+c.http+"', node: '"+c.node+"'}\n"+oneNodeYAML)
		e, err := New(cfg, Options{HealthInterval: -1, Logger: zap.NewNop()})
		if err == nil {
			e.Close()
			t.Fatalf("%s %s: New started", c.key, c.http+" "+c.node)
		}
		var se *config.StartError
		if !errors.As(err, &se) {
			t.Fatalf("%s: %v, want a *config.StartError", c.key, err)
		}
		if len(se.Keys) != 1 || se.Keys[0] != c.key || !strings.Contains(se.Fix, c.fix) || !strings.Contains(se.Fix, c.key) {
			t.Errorf("%s: keys %v, fix %q; want [%s] and a fix with %q", c.key, se.Keys, se.Fix, c.key, c.fix)
		}
	}
}

// A node-listener TLS file that does not load fails New with a
// *config.StartError naming its full key (listen.tls.*) and its path.
func TestTLSFileErrorNamesTheFullKey37m(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	_, cfg := edgeFile(t, "listen: {http: '127.0.0.1:0', node: '127.0.0.1:0', tls: {cert_file: '"+missing+"', key_file: '"+missing+"'}}\n"+oneNodeYAML)
	e, err := New(cfg, Options{HealthInterval: -1, Logger: zap.NewNop()})
	if err == nil {
		e.Close()
		t.Fatal("New started without its key pair")
	}
	var se *config.StartError
	if !errors.As(err, &se) {
		t.Fatalf("%v, want a *config.StartError", err)
	}
	// One file named by both keys: both are named, each with the path.
	if strings.Join(se.Keys, " ") != "listen.tls.cert_file listen.tls.key_file" || len(se.Files) != 2 || se.Files[0] != missing {
		t.Errorf("keys %v, files %v; want both listen.tls keys and %s", se.Keys, se.Files, missing)
	}
}
