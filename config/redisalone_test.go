package config

import (
	"strings"
	"testing"
)

// Redis keys given without cluster.redis.address are a problem naming
// them: without an address the edge shares nothing, which an operator who
// set how to reach Redis (a password, a database) did not mean.
func TestRedisKeysWithoutAddressAreAProblem(t *testing.T) {
	for _, tc := range []struct{ redis, want string }{
		{`{password_env: IOP_TEST_REDIS_PW}`, "cluster.redis.password_env given without cluster.redis.address"},
		{`{db: 2, timeout_ms: 100}`, "cluster.redis.db, cluster.redis.timeout_ms given without cluster.redis.address"},
		{`{address: "", lease_ttl_sec: 15}`, "cluster.redis.lease_ttl_sec given without cluster.redis.address"},
		{`{db: -1}`, "cluster.redis.db given without cluster.redis.address"},
	} {
		f := writeFile(t, "edge.yaml", "cluster: {redis: "+tc.redis+"}\n")
		if _, err := LoadEdge(f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a problem %q", tc.redis, err, tc.want)
		}
	}
	t.Setenv("IOP_CLUSTER_REDIS_PASSWORD_ENV", "IOP_TEST_REDIS_PW")
	if _, err := LoadEdge(writeFile(t, "edge.yaml", "log: {level: info}\n")); err == nil || !strings.Contains(err.Error(), "cluster.redis.password_env given") {
		t.Errorf("password_env from the environment without an address: %v", err)
	}
}

// Nothing of Redis set, or an address with the rest, is no problem.
func TestRedisAloneOrWithAddressIsFine(t *testing.T) {
	t.Setenv("IOP_TEST_REDIS_PW", "pw")
	for _, body := range []string{
		"log: {level: info}\n",
		"cluster: {redis: {address: \"\"}}\n",
		"cluster: {redis: {address: \"r:6379\", password_env: IOP_TEST_REDIS_PW, db: 1}}\n",
	} {
		if _, err := LoadEdge(writeFile(t, "edge.yaml", body)); err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
}
