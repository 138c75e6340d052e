package config

import (
	"strings"
	"testing"
)

func TestNodeEdgeAddresses(t *testing.T) {
	base := func() *Node { return &Node{Node: NodeIdentity{ID: "a", Token: "t"}} }
	c := base()
	c.Edge.Addresses = []string{"edge-1:7070", "10.0.0.2:7070"}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if got := c.Edge.Targets(); len(got) != 2 || got[0] != "edge-1:7070" {
		t.Fatalf("targets %v", got)
	}
	c = base()
	c.Edge.Address = "e:7070"
	if err := c.Normalize(); err != nil || len(c.Edge.Targets()) != 1 || c.Edge.Targets()[0] != "e:7070" {
		t.Fatalf("single address: %v %v", c.Edge.Targets(), err)
	}
	for _, tc := range []struct {
		address   string
		addresses []string
		want      string
	}{
		{"", nil, "edge.address (or edge.addresses) is required"},
		{"e:1", []string{"f:1"}, "both set"},
		{"", []string{"f:1", "f:1"}, "listed twice"},
		{"", []string{"nope"}, "edge.addresses[0]"},
	} {
		c := base()
		c.Edge.Address, c.Edge.Addresses = tc.address, tc.addresses
		if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %v: err = %v, want %q", tc.address, tc.addresses, err, tc.want)
		}
	}
}

// runtime.gc_heap_floor_mb: 64 MiB when unset, 0 off, out of range refused.
func TestNodeGCHeapFloor(t *testing.T) {
	c := &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Address: "e:1"}}
	if err := c.Normalize(); err != nil || c.Runtime.GCHeapFloorBytes() != 64<<20 {
		t.Fatalf("default floor %d, err %v", c.Runtime.GCHeapFloorBytes(), err)
	}
	for _, v := range []int{-1, 16<<10 + 1} {
		c := &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Address: "e:1"}, Runtime: Runtime{GCHeapFloorMB: &v}}
		if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), "runtime.gc_heap_floor_mb") {
			t.Errorf("floor %d: err = %v", v, err)
		}
	}
}
