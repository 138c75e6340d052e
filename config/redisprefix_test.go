package config

import (
	"strings"
	"testing"
)

// cluster.redis.key_prefix defaults to "iop" (the key names of edges that
// set none) and is kept as given when valid.
func TestRedisKeyPrefixDefaultAndValid(t *testing.T) {
	for _, tc := range []struct{ given, want string }{
		{"", "iop"},
		{"iop", "iop"},
		{"prod-eu_1", "prod-eu_1"},
		{"{iop}", "{iop}"},
		{"équipe", "équipe"},
		{strings.Repeat("p", MaxRedisKeyPrefix), strings.Repeat("p", MaxRedisKeyPrefix)},
	} {
		c := minimalEdge()
		c.Cluster.Redis.Address = "r:6379"
		c.Cluster.Redis.KeyPrefix = tc.given
		if err := c.Normalize(); err != nil {
			t.Errorf("key_prefix %q: %v", tc.given, err)
			continue
		}
		if got := c.Cluster.Redis.KeyPrefix; got != tc.want {
			t.Errorf("key_prefix %q normalized to %q, want %q", tc.given, got, tc.want)
		}
	}
}

// A prefix with ':' (which could make one deployment's key spell
// another's), whitespace, control characters, invalid UTF-8 or longer than
// the bound is refused by name; given without an address it is a problem
// like the other Redis keys.
func TestRedisKeyPrefixRefused(t *testing.T) {
	for _, tc := range []struct{ given, want string }{
		{"a:b", "cluster.redis.key_prefix must not contain ':'"},
		{"iop:", "cluster.redis.key_prefix must not contain ':'"},
		{"my app", "cluster.redis.key_prefix must not contain whitespace or control characters"},
		{"app\x00", "cluster.redis.key_prefix must not contain whitespace or control characters"},
		{"app\n", "cluster.redis.key_prefix must not contain whitespace or control characters"},
		{"app\u200b", "cluster.redis.key_prefix must not contain whitespace or control characters"},
		{"app\xff", "cluster.redis.key_prefix is not valid UTF-8"},
		{strings.Repeat("p", MaxRedisKeyPrefix+1), "cluster.redis.key_prefix is 65 bytes long, more than 64"},
	} {
		c := minimalEdge()
		c.Cluster.Redis.Address = "r:6379"
		c.Cluster.Redis.KeyPrefix = tc.given
		if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("key_prefix %q: %v, want a problem %q", tc.given, err, tc.want)
		}
	}
	f := writeFile(t, "edge.yaml", "cluster: {redis: {key_prefix: blue}}\n")
	if _, err := LoadEdge(f); err == nil || !strings.Contains(err.Error(), "cluster.redis.key_prefix given without cluster.redis.address") {
		t.Errorf("key_prefix without an address: %v", err)
	}
	t.Setenv("IOP_CLUSTER_REDIS_KEY_PREFIX", "blue")
	if c, err := LoadEdge(writeFile(t, "edge.yaml", "cluster: {redis: {address: \"r:6379\"}}\n")); err != nil || c.Cluster.Redis.KeyPrefix != "blue" {
		t.Errorf("key_prefix from the environment: %v", err)
	}
}
