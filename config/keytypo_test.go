package config

import (
	"strings"
	"testing"
)

// A misspelt provider key (which would reach the node as an adapter
// setting that openai_compat and vllm never read) is refused with the key
// it was meant to be; adapter settings themselves still pass.
func TestProviderKeySlipsRefused(t *testing.T) {
	f := writeFile(t, "edge.yaml", `
nodes:
  - id: a
    token: t
    providers:
      - {name: p, type: vllm, base_url: "http://h:8000/v1", capcity: 8, long-capacity: 2, tiemout_sec: 60}
models:
  - name: m
    providers: [{node: a, provider: p, target: x}]
`)
	_, err := LoadEdge(f)
	for _, want := range []string{
		`nodes[0].providers[0]: unknown key "capcity"; did you mean capacity?`,
		`nodes[0].providers[0]: unknown key "long-capacity"; did you mean long_capacity?`,
		`nodes[0].providers[0]: unknown key "tiemout_sec"; did you mean timeout_sec?`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v lack %q", err, want)
		}
	}
	c := minimalEdge()
	c.Nodes[0].Providers[0].Extra = map[string]any{}
	for _, k := range []string{"delay_ms", "fail_trigger", "options", "keep_alive", "env_allow",
		"resume_args", "session_args", "session_id_regex", "session_id_stream", "max_stderr_bytes", "kill_grace_ms"} {
		c.Nodes[0].Providers[0].Extra[k] = "1"
	}
	if err := c.Normalize(); err != nil {
		t.Fatalf("adapter settings refused: %v", err)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"capacity", "capcity", 1}, {"tpye", "type", 1}, {"abc", "", 3}, {"kitten", "sitting", 3}, {strings.Repeat("a", 100), "a", 100}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
