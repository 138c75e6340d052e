package config

import (
	"strings"
	"testing"
)

// edge.addresses entries are compared as the node compares them
// (EdgeAddressKey), so an edge listed twice in two spellings is refused at
// load as one listed twice as written is; distinct sockets are not.
func TestNodeEdgeAddressesListedTwiceInAnySpelling(t *testing.T) {
	node := func(addresses ...string) *Node {
		return &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Addresses: addresses}}
	}
	for _, tc := range []struct {
		addresses []string
		want      string
	}{
		{[]string{"edge:7000", "edge.:7000"}, `edge.addresses[1] "edge.:7000" is listed twice (as edge.addresses[0] "edge:7000")`},
		{[]string{"Edge.Test.:7000", "x:1", "edge.test:07000"}, `edge.addresses[2] "edge.test:07000" is listed twice (as edge.addresses[0] "Edge.Test.:7000")`},
		{[]string{"10.0.0.1:7000", "10.0.0.1:+7000"}, "edge.addresses[1]"},
		{[]string{"10.0.0.1:7000", "[::ffff:10.0.0.1]:7000"}, "edge.addresses[1]"},
	} {
		err := node(tc.addresses...).Normalize()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "listed twice") {
			t.Errorf("%q: err = %v, want %q listed twice", tc.addresses, err, tc.want)
		}
	}
	for _, addresses := range [][]string{
		{"edge:7000", "edge:7001"},
		{"edge:7000", "edge2:7000"},
		{"[fe80::1%eth0]:7000", "[fe80::1%eth1]:7000"},
		{"10.0.0.1:7000", "10.0.0.2:7000"},
	} {
		if err := node(addresses...).Normalize(); err != nil {
			t.Errorf("%q: err = %v, want none (distinct sockets)", addresses, err)
		}
	}
}

func TestEdgeAddressKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"EDGE.:07000", "edge:7000"},
		{"edge:+7000", "edge:7000"},
		{"[::ffff:10.0.0.1]:7000", "10.0.0.1:7000"},
		{"[fe80::1%eth0]:7000", "[fe80::1%eth0]:7000"},
		{"not-host-port", "not-host-port"},
		{"edge:http", "edge:http"},
	} {
		if got := EdgeAddressKey(tc.in); got != tc.want {
			t.Errorf("EdgeAddressKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
