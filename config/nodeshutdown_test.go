package config

import (
	"strings"
	"testing"
	"time"
)

// shutdown.drain_sec defaults to 10 s, 0 (no drain) stays 0, a negative
// value is reported with every other problem, and IOP_SHUTDOWN_DRAIN_SEC
// overrides the file.
func TestNodeShutdownDrain(t *testing.T) {
	c := &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Address: "e:7070"}}
	if err := c.Normalize(); err != nil || c.Shutdown.Drain() != 10*time.Second {
		t.Fatalf("default drain %s, %v", c.Shutdown.Drain(), err)
	}
	zero := 0.0
	c = &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Address: "e:7070"}, Shutdown: NodeShutdown{DrainSec: &zero}}
	if err := c.Normalize(); err != nil || c.Shutdown.Drain() != 0 {
		t.Fatalf("drain_sec 0: %s, %v", c.Shutdown.Drain(), err)
	}
	_, err := LoadNode(writeFile(t, "node.yaml", "edge: {address: 'e:1'}\nnode: {id: a}\nshutdown: {drain_sec: -1}\n"))
	for _, want := range []string{"shutdown.drain_sec must not be negative", "node.token (or node.token_env) is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v lack %q", err, want)
		}
	}
	f := writeFile(t, "node.yaml", "edge: {address: 'e:1'}\nnode: {id: a, token: t}\nshutdown: {drain_sec: 30}\n")
	t.Setenv("IOP_SHUTDOWN_DRAIN_SEC", "2.5")
	got, err := LoadNode(f)
	if err != nil || got.Shutdown.Drain() != 2500*time.Millisecond {
		t.Fatalf("env override: %v, %v", got, err)
	}
	t.Setenv("IOP_SHUTDOWN_DRAIN_SEC", "-3")
	if _, err := LoadNode(f); err == nil || !strings.Contains(err.Error(), "shutdown.drain_sec must not be negative") {
		t.Fatalf("negative env value: %v", err)
	}
}
