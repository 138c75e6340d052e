package config

import (
	"net"
	"testing"
)

// The quickstart pair `make run` starts passes validation and agrees: the
// node dials the edge's node listener with a token the edge accepts, and
// model demo is served by that node.
func TestQuickstartConfigsAgree(t *testing.T) {
	edge, err := LoadEdge("../configs/edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	node, err := LoadNode("../configs/node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, wirePort, _ := net.SplitHostPort(edge.Listen.Node)
	if h, p, _ := net.SplitHostPort(node.Edge.Address); h != "127.0.0.1" || p != wirePort {
		t.Errorf("node dials %s, edge listens on %s", node.Edge.Address, edge.Listen.Node)
	}
	spec := edge.Node(node.Node.ID)
	if spec == nil || spec.Token != node.Node.Token {
		t.Fatalf("edge does not accept node %q with its token", node.Node.ID)
	}
	for _, m := range edge.Models {
		if m.Name == "demo" && len(m.Providers) > 0 && m.Providers[0].Node == node.Node.ID {
			return
		}
	}
	t.Error("model demo is not served by the quickstart node")
}
