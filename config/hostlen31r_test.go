package config

import (
	"fmt"
	"strings"
	"testing"
)

// An address gets one problem however many its host name has (too long
// and with long labels), and the tracing endpoint's port does not count
// in its host name's length.
func TestHostNameOneProblemAndTracingAtTheBound(t *testing.T) {
	long := strings.Repeat("a", 64) + "." + strings.Repeat("b", 64) + "." + hostOfLen(200)
	node := writeFile(t, "node.yaml", fmt.Sprintf(`
edge: {addresses: ["%s:7000", "%s.x:7000"]}
node: {id: n1, token: t}
`, long, strings.Repeat("c", 64)+"."+strings.Repeat("d", 64)))
	_, err := LoadNode(node)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, key := range []string{"edge.addresses[0]", "edge.addresses[1]"} {
		if n := strings.Count(err.Error(), key); n != 1 {
			t.Errorf("%s named %d times, want 1: %v", key, n, err)
		}
	}

	edge := writeFile(t, "edge.yaml", fmt.Sprintf(`
tracing: {enabled: true, endpoint: "%s:4318"}
nodes: [{id: a, token: t, providers: [{name: p, type: mock}]}]
models: [{name: m, providers: [{node: a, provider: p, target: x}]}]
`, hostOfLen(253)))
	if _, err := LoadEdge(edge); err != nil {
		t.Fatalf("a 253-character tracing host refused: %v", err)
	}
}
