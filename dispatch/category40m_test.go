package dispatch

import (
	"testing"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/testcaps"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The category an adapter declares wins over the one its type is known
// to have: the type's only stands in until the node has said. A vllm
// provider whose adapter declares api is api once its node is ready, an
// openai_compat one declaring local_inference is local_inference.
func TestDeclaredCategoryWinsOverTheTypes40m(t *testing.T) {
	ns := config.NodeSpec{ID: "a", Token: testToken, Providers: []config.ProviderSpec{
		{Name: "v", Type: "vllm", BaseURL: "http://127.0.0.1:1/v1"},
		{Name: "o", Type: "openai_compat", BaseURL: "http://127.0.0.1:1/v1"},
	}}
	ms := config.ModelSpec{Name: "m", Providers: []config.ModelProvider{{Node: "a", Provider: "v", Target: "t"}, {Node: "a", Provider: "o", Target: "t"}}}
	cfg := &config.Edge{Nodes: []config.NodeSpec{ns}, Models: []config.ModelSpec{ms}}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, cfg, nil)
	declared := map[string]string{"v": "api", "o": "local_inference"}
	c := f.register("a")
	f.d.mu.Lock()
	caps := testcaps.For(NodePayload(&f.d.cfg.Nodes[0]))
	f.d.mu.Unlock()
	for _, ac := range caps {
		ac.Category = declared[ac.GetAdapter()]
	}
	if resp := f.d.Ready(c, &iop.NodeReadyRequest{NodeId: "a", Adapters: caps}); !resp.GetReady() {
		t.Fatalf("ready: refused: %s", resp.GetReason())
	}
	f.d.Activate(c)
	for _, p := range f.d.Status().Nodes[0].Providers {
		if p.Category != declared[p.ProviderId] {
			t.Errorf("%s (type %s) category %q, want %q as its adapter declared", p.ProviderId, p.Type, p.Category, declared[p.ProviderId])
		}
	}
}

// The type's category is looked up by the provider's type, not its name:
// a vllm provider named gpu0 of a node never connected is
// local_inference. (TestStatusCategoryDefaultsFromType names each
// provider after its type.)
func TestTypeCategoryByTypeNotName40m(t *testing.T) {
	ns := config.NodeSpec{ID: "a", Token: testToken, Providers: []config.ProviderSpec{
		{Name: "gpu0", Type: "vllm", BaseURL: "http://127.0.0.1:1/v1"},
		{Name: "coder", Type: "cli", Command: []string{"cat"}},
	}}
	ms := config.ModelSpec{Name: "m", Providers: []config.ModelProvider{{Node: "a", Provider: "gpu0", Target: "t"}, {Node: "a", Provider: "coder", Target: "t"}}}
	cfg := &config.Edge{Nodes: []config.NodeSpec{ns}, Models: []config.ModelSpec{ms}}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, cfg, nil)
	want := map[string]string{"gpu0": "local_inference", "coder": "cli"}
	for _, p := range f.d.Status().Nodes[0].Providers {
		if p.Category != want[p.ProviderId] {
			t.Errorf("%s (type %s) category %q before its node connected, want %q", p.ProviderId, p.Type, p.Category, want[p.ProviderId])
		}
	}
}
