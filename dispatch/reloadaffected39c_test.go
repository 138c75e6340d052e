package dispatch

import (
	"slices"
	"testing"
)

// POST /admin/reload pushes refreshes to the affected ready nodes only
// (CONTRACT §5): of two ready nodes, a reload that changes one node's
// provider names that node alone; one that changes only a model's queue
// settings (nothing a node runs) names none.
func TestReloadPushesToAffectedNodesOnly(t *testing.T) {
	nodes := func(capA int) []tNode {
		return []tNode{{id: "a", provs: []tProv{{name: "p", cap: capA}}}, {id: "b", provs: []tProv{{name: "q", cap: 1}}}}
	}
	models := func(timeout float64) []tModel {
		return []tModel{{name: "m", timeout: timeout, cands: []string{"a/p", "b/q"}}}
	}
	f := newFixture(t, buildCfg(t, nodes(1), models(30)), nil)
	f.up("a")
	f.up("b")
	if changed := f.d.Reload(buildCfg(t, nodes(1), models(5))); len(changed) != 0 {
		t.Fatalf("only a model's queue_timeout_sec changed: refreshes for %v, want none", changed)
	}
	if changed := f.d.Reload(buildCfg(t, nodes(2), models(5))); !slices.Equal(changed, []string{"a"}) {
		t.Fatalf("a's capacity changed: refreshes for %v, want [a]", changed)
	}
}
