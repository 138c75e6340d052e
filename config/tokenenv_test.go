package config

import (
	"strings"
	"testing"
)

// token_env beside an inline token, or naming a variable that is unset or
// empty, is refused by key; the value is never shown.
func TestTokenEnvMisuseRefused(t *testing.T) {
	t.Setenv("IOP_TEST_EMPTY_TOKEN", "")
	t.Setenv("IOP_TEST_NODE_TOKEN", "tok-SECRET")
	c := minimalEdge()
	c.Nodes[0].TokenEnv = "IOP_TEST_NODE_TOKEN" // beside token: t
	c.Nodes = append(c.Nodes, NodeSpec{ID: "b", TokenEnv: "IOP_TEST_EMPTY_TOKEN"})
	err := c.Normalize()
	for _, want := range []string{
		"nodes[0].token and nodes[0].token_env are both set; use one",
		"nodes[1].token_env names IOP_TEST_EMPTY_TOKEN, which is unset or empty",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v lack %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "SECRET") {
		t.Errorf("a token reached the problems: %v", err)
	}
	n := &Node{Edge: NodeEdge{Address: "e:7070"}, Node: NodeIdentity{ID: "a", TokenEnv: "IOP_TEST_EMPTY_TOKEN"}}
	if err := n.Normalize(); err == nil || !strings.Contains(err.Error(), "node.token_env names IOP_TEST_EMPTY_TOKEN, which is unset or empty") {
		t.Errorf("node: err = %v", err)
	}
	n = &Node{Edge: NodeEdge{Address: "e:7070"}, Node: NodeIdentity{ID: "a", TokenEnv: "IOP_TEST_NODE_TOKEN"}}
	if err := n.Normalize(); err != nil || n.Node.Token != "tok-SECRET" {
		t.Errorf("node token from env: %v", err)
	}
}
