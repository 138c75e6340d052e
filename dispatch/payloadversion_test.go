package dispatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// A node's config version depends only on the config: loading the same
// file again (a reload of an unchanged file) gives the same version, so
// nothing is pushed, whatever adapter-specific keys (nested maps, lists,
// numbers) the providers carry and in whatever order maps are walked. The
// payload names the API key's variable, never its value.
func TestConfigVersionStableAcrossLoads(t *testing.T) {
	t.Setenv("IOP_TEST_UPSTREAM_KEY", "sk-must-not-leave-the-edge")
	file := filepath.Join(t.TempDir(), "edge.yaml")
	const yaml = `
nodes:
  - id: n1
    token: t0ken-for-n1
    providers:
      - name: p
        type: openai_compat
        base_url: http://127.0.0.1:9/v1
        api_key_env: IOP_TEST_UPSTREAM_KEY
        capacity: 2
        headers: {X-A: "1", X-B: "2", X-C: "3", X-D: "4"}
        extra_body: {temperature: 0.5, stop: ["a", "b"], nested: {z: 1, y: [1, 2], x: {w: true}}}
        kill_grace_ms: 2500
        ratio: 0.125
models:
  - name: m
    providers:
      - {node: n1, provider: p, target: t}
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var want string
	for i := range 50 {
		cfg, err := config.LoadEdge(file)
		if err != nil {
			t.Fatal(err)
		}
		p := NodePayload(cfg.Node("n1"))
		if i == 0 {
			want = p.GetConfigVersion()
			if a := p.GetAdapters(); len(a) != 1 || a[0].GetSettings()["extra_body"] == "" || len(a[0].GetHeaders()) != 4 {
				t.Fatalf("adapter-specific keys not in the payload: %v", a)
			}
			if s := p.String(); strings.Contains(s, "sk-must-not") || strings.Contains(s, "t0ken") {
				t.Fatalf("payload carries a secret: %s", s)
			}
		}
		if got := p.GetConfigVersion(); got != want || got == "" {
			t.Fatalf("load %d: config version %q, first load %q", i, got, want)
		}
	}
}
