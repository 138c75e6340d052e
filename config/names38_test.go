package config

import (
	"fmt"
	"strings"
	"testing"
)

// Node ids, provider and model names are bounded and free of control
// characters and of space at either end, each problem named, all at once;
// a name at the bound, or with space, '/', ':' or non-ASCII inside, is
// kept.
func TestEdgeNamesBounded(t *testing.T) {
	long := func(n int) string { return strings.Repeat("n", n) }
	for _, tc := range []struct {
		name            string
		node, prov, mdl string
		want            []string
	}{
		{"at the bounds", long(MaxNodeIDBytes), long(MaxProviderNameBytes), long(MaxModelNameBytes), nil},
		{"inner space, slash, colon, non-ASCII", "gpu a/b", "p:long", "org/모델 v1", nil},
		{"one byte over", long(MaxNodeIDBytes + 1), long(MaxProviderNameBytes + 1), long(MaxModelNameBytes + 1), []string{
			fmt.Sprintf("nodes[0].id is %d bytes long, more than %d", MaxNodeIDBytes+1, MaxNodeIDBytes),
			fmt.Sprintf("nodes[0].providers[0].name is %d bytes long, more than %d", MaxProviderNameBytes+1, MaxProviderNameBytes),
			fmt.Sprintf("models[0].name is %d bytes long, more than %d", MaxModelNameBytes+1, MaxModelNameBytes),
		}},
		{"control characters", "a\nb", "p\x00", "m\x7f", []string{
			"nodes[0].id must not contain control characters (U+000A)",
			"nodes[0].providers[0].name must not contain control characters (U+0000)",
			"models[0].name must not contain control characters (U+007F)",
		}},
		{"space at an end", " a", "p\u00a0", "m ", []string{
			"nodes[0].id must not begin or end with whitespace",
			"nodes[0].providers[0].name must not begin or end with whitespace",
			"models[0].name must not begin or end with whitespace",
		}},
		{"not UTF-8", "a\xff", "p", "m", []string{"nodes[0].id is not valid UTF-8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := minimalEdge()
			c.Nodes[0].ID, c.Nodes[0].Providers[0].Name, c.Models[0].Name = tc.node, tc.prov, tc.mdl
			c.Models[0].Providers[0].Node, c.Models[0].Providers[0].Provider = tc.node, tc.prov
			err := c.Normalize()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// The candidate names the same node and provider: no second
			// problem about a node or provider that is not configured.
			if strings.Contains(err.Error(), "is not a") || len(err.Error()) > 2000 {
				t.Errorf("problems beyond the names':\n%v", err)
			}
		})
	}
}

// The node's own id is bounded as the edge's list of nodes is: a node
// whose id no edge could accept is refused at start, not at every
// registration.
func TestNodeIDBounded(t *testing.T) {
	for id, want := range map[string]string{
		strings.Repeat("n", MaxNodeIDBytes):   "",
		strings.Repeat("n", MaxNodeIDBytes+1): fmt.Sprintf("node.id is %d bytes long, more than %d", MaxNodeIDBytes+1, MaxNodeIDBytes),
		"gpu-a\n":                             "node.id must not contain control characters (U+000A)",
		"gpu-a ":                              "node.id must not begin or end with whitespace",
	} {
		f := writeFile(t, "node.yaml", fmt.Sprintf("edge: {address: 127.0.0.1:7070}\nnode: {id: %q, token: t}\n", id))
		_, err := LoadNode(f)
		switch {
		case want == "" && err != nil:
			t.Errorf("id of %d bytes refused: %v", len(id), err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("id %.20q: %v, want %q", id, err, want)
		}
	}
}
