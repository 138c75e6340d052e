package config

import (
	"strings"
	"testing"
)

// A key listed twice, a priority given twice for one key, both listeners
// on one address and a negative Redis database are each refused by name,
// all at once; the repeated key's value is never quoted.
func TestEdgeRepeatsAndCollisionsRefused(t *testing.T) {
	c := minimalEdge()
	c.Auth.APIKeys = []string{"sk-ONE", "sk-TWO", "sk-ONE"}
	c.Auth.KeyPriorities = []KeyPriority{{Key: "sk-TWO", Priority: 1}, {Key: "sk-TWO", Priority: -3}}
	c.Listen.HTTP, c.Listen.Node = "127.0.0.1:9000", "127.0.0.1:9000"
	c.Cluster.Redis = ClusterRedis{Address: "r:6379", DB: -1}
	err := c.Normalize()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"auth.api_keys[2] repeats auth.api_keys[0]",
		"auth.key_priorities[1].key repeats auth.key_priorities[0].key",
		`listen.http and listen.node are both "127.0.0.1:9000"`,
		"cluster.redis.db must not be negative",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "sk-") {
		t.Errorf("a key reached the problems:\n%v", err)
	}
	// Port 0 (any free port) on both is fine: they get different ones.
	c = minimalEdge()
	c.Listen.HTTP, c.Listen.Node = "127.0.0.1:0", "127.0.0.1:0"
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
}

// A heartbeat interval below 50 ms is refused: under a millisecond the
// wire's value rounds to 0 and the node would silently use 5 s; just above
// it, each node would send hundreds of heartbeats a second.
func TestHeartbeatIntervalFloor(t *testing.T) {
	for _, v := range []float64{0.0004, 0.01, -1} {
		c := minimalEdge()
		c.Nodes[0].HeartbeatIntervalSec = v
		c.Nodes[0].HeartbeatTimeoutSec = 1
		if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), "nodes[0].heartbeat_interval_sec must be at least 0.05") {
			t.Errorf("%g: err = %v", v, err)
		}
	}
	c := minimalEdge()
	c.Nodes[0].HeartbeatIntervalSec, c.Nodes[0].HeartbeatTimeoutSec = 0.05, 1
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
}
