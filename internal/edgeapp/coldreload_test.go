package edgeapp

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// Each key fixed at start, changed alone in the file, is named by the
// reload that could not apply it.
func TestReloadNamesEachColdKey(t *testing.T) {
	const base = "listen: {http: '127.0.0.1:0', node: '127.0.0.1:0'}\n" + oneNodeYAML
	for _, tc := range []struct{ add, key string }{
		{"limits: {read_header_timeout_sec: 3}\n", "limits.read_header_timeout_sec"},
		{"limits: {idle_timeout_sec: 7}\n", "limits.idle_timeout_sec"},
		{"tracing: {sample_ratio: 0.5}\n", "tracing"},
		{"runtime: {gc_heap_floor_mb: 8}\n", "runtime"},
		{"cluster: {redis: {address: '127.0.0.1:1'}}\n", "cluster"},
	} {
		file, cfg := edgeFile(t, base)
		e, err := New(cfg, Options{HealthInterval: -1, ConfigFile: file})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(base+tc.add), 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := e.Reload()
		e.Close()
		if err != nil {
			t.Fatalf("%s: %v", strings.TrimSpace(tc.add), err)
		}
		if !slices.Equal(rep.RestartRequired, []string{tc.key}) {
			t.Errorf("%s: restart_required %v, want [%s]", strings.TrimSpace(tc.add), rep.RestartRequired, tc.key)
		}
	}
}
