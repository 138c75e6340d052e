package config

import (
	"strings"
	"testing"
)

// Omitted reconnect and directory keys take the contract's defaults;
// max_attempts 0 means unlimited, a zero interval and a negative budget
// are refused by name. One address given as a list is that one edge.
func TestNodeReconnectDefaultsAndBounds(t *testing.T) {
	c := &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Addresses: []string{"e:7070"}}}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if *c.Reconnect.IntervalSec != 10 || *c.Reconnect.MaxAttempts != 10 || c.StoreDir != "./var/node" || c.WorkspaceRoot != "./var/workspaces" {
		t.Fatalf("defaults: interval %g, attempts %d, store_dir %q, workspace_root %q",
			*c.Reconnect.IntervalSec, *c.Reconnect.MaxAttempts, c.StoreDir, c.WorkspaceRoot)
	}
	if got := c.Edge.Targets(); len(got) != 1 || got[0] != "e:7070" {
		t.Fatalf("targets %v", got)
	}
	zero := 0
	c = &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Address: "e:7070"}}
	c.Reconnect.MaxAttempts = &zero
	if err := c.Normalize(); err != nil || *c.Reconnect.MaxAttempts != 0 {
		t.Fatalf("max_attempts 0 (unlimited): %v", err)
	}
	zeroF, neg := 0.0, -1
	c = &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Address: "e:7070"}}
	c.Reconnect.IntervalSec, c.Reconnect.MaxAttempts = &zeroF, &neg
	err := c.Normalize()
	for _, want := range []string{"reconnect.interval_sec must be > 0", "reconnect.max_attempts must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v lack %q", err, want)
		}
	}
}

// A client certificate without its key (or the reverse) is refused.
func TestNodeClientCertNeedsKey(t *testing.T) {
	for _, tls := range []ClientTLS{{Enabled: true, CertFile: "n.crt"}, {Enabled: true, KeyFile: "n.key"}} {
		c := &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Address: "e:7070", TLS: tls}}
		if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), "edge.tls: cert_file and key_file must be set together") {
			t.Errorf("%+v: err = %v", tls, err)
		}
	}
}
