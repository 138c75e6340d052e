package dispatch

import (
	"testing"

	"github.com/iop-gateway/iop/config"
)

// A provider without a configured category shows the one of its type
// (CONTRACT §3: "default from type"), also while its node has never
// connected and so no adapter has declared one: a vllm provider of a
// node not yet up is local_inference in /admin/status, not api.
func TestStatusCategoryDefaultsFromType(t *testing.T) {
	want := map[string]string{
		"openai_compat": "api",
		"vllm":          "local_inference",
		"ollama":        "local_inference",
		"llamacpp":      "local_inference",
		"cli":           "cli",
		"mock":          "api",
	}
	ns := config.NodeSpec{ID: "a", Token: testToken}
	ms := config.ModelSpec{Name: "m"}
	for typ := range want {
		ps := config.ProviderSpec{Name: typ, Type: typ}
		switch typ {
		case "cli":
			ps.Command = []string{"cat"}
		case "mock":
		default:
			ps.BaseURL = "http://127.0.0.1:1/v1"
		}
		ns.Providers = append(ns.Providers, ps)
		ms.Providers = append(ms.Providers, config.ModelProvider{Node: "a", Provider: typ, Target: "t"})
	}
	// A configured category wins over the type's.
	ns.Providers = append(ns.Providers, config.ProviderSpec{Name: "own", Type: "vllm", Category: "api"})
	want["own"] = "api"
	cfg := &config.Edge{Nodes: []config.NodeSpec{ns}, Models: []config.ModelSpec{ms}}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, cfg, nil)
	check := func(when string) {
		t.Helper()
		st := f.d.Status()
		seen := 0
		for _, p := range st.Nodes[0].Providers {
			seen++
			if p.Category != want[p.ProviderId] {
				t.Errorf("%s: %s (type %s) category %q, want %q", when, p.ProviderId, p.Type, p.Category, want[p.ProviderId])
			}
		}
		if seen != len(want) {
			t.Errorf("%s: %d providers listed, want %d", when, seen, len(want))
		}
	}
	check("never connected")
	c := f.up("a")
	check("ready")
	f.d.Closed(c, nil)
	if f.d.Status().Nodes[0].Connected {
		t.Fatal("node a still connected after its session closed")
	}
	check("after the session ended")
}
