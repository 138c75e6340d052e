package config

import (
	"strings"
	"testing"
)

const decodeBase = `
nodes:
  - id: a
    token: t
    providers: [{name: p, type: mock}]
models:
  - name: m
    providers: [{node: a, provider: p, target: x}]
`

// A value of the wrong kind is refused, naming its key, instead of being
// bent into something the file does not say: a fraction truncated (0.5 s
// became 0 and so the 30 s default), true read as 1, "" as 0, a number or
// a boolean turned into a token other than the one written.
func TestScalarsOfTheWrongKindRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"limits: {write_timeout_sec: 0.5}", "'limits.write_timeout_sec' must be a whole number"},
		{"limits: {response_timeout_sec: 2.9}", "'limits.response_timeout_sec' must be a whole number"},
		{"limits: {write_timeout_sec: -0.5}", "'limits.write_timeout_sec' must be a whole number"},
		{"limits: {write_timeout_sec: true}", "'limits.write_timeout_sec' must be a number, not true or false"},
		{"limits: {write_timeout_sec: ''}", "'limits.write_timeout_sec' must be a whole number"},
		{"limits: {max_body_bytes: 1e30}", "'limits.max_body_bytes' is out of range"},
		{"limits: {max_body_bytes: 18446744073709551615}", "'limits.max_body_bytes' is out of range"},
		{"models: [{name: m, max_queue: 0.5, providers: [{node: a, provider: p, target: x}]}]", "'models[0].max_queue' must be a whole number"},
		{"auth: {api_keys: [k], key_priorities: [{key: k, priority: 1.5}]}", "'auth.key_priorities[0].priority' must be a whole number"},
		{"tracing: {enabled: 2}", "'tracing.enabled' must be true or false"},
		{"tracing: {sample_ratio: true}", "'tracing.sample_ratio' must be a number"},
		{"auth: {admin_token: true}", "'auth.admin_token' must be a string"},
		{"auth: {admin_token: 0123}", "'auth.admin_token' must be a string"},
		{"auth: {api_keys: [1234]}", "'auth.api_keys[0]' must be a string"},
	} {
		body := decodeBase
		if !strings.HasPrefix(tc.yaml, "models:") {
			body += tc.yaml + "\n"
		} else {
			body = strings.Replace(body, "models:\n  - name: m\n    providers: [{node: a, provider: p, target: x}]\n", tc.yaml+"\n", 1)
		}
		_, err := LoadEdge(writeFile(t, "edge.yaml", body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
	// What a file may say stays accepted: a whole float where a whole
	// number goes, a whole number where seconds go, a quoted token.
	c, err := LoadEdge(writeFile(t, "edge.yaml", decodeBase+"limits: {write_timeout_sec: 5.0}\nauth: {admin_token: '0123'}\ncluster: {redis: {address: 'r:1', lease_ttl_sec: 20}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.WriteTimeoutSec != 5 || c.Auth.AdminToken != "0123" || c.Cluster.Redis.LeaseTTLSec != 20 {
		t.Fatalf("decoded %d %q %g", c.Limits.WriteTimeoutSec, c.Auth.AdminToken, c.Cluster.Redis.LeaseTTLSec)
	}
}

// IOP_* variables are parsed in base 10 and strictly: "010" is ten, not
// octal eight; "yes" is not a boolean.
func TestEnvScalarsParsedStrictly(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	t.Setenv("IOP_LIMITS_WRITE_TIMEOUT_SEC", "010")
	t.Setenv("IOP_CLUSTER_REDIS_ADDRESS", "r:1")
	t.Setenv("IOP_CLUSTER_REDIS_LEASE_TTL_SEC", "2.5")
	c, err := LoadEdge(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.WriteTimeoutSec != 10 || c.Cluster.Redis.LeaseTTLSec != 2.5 {
		t.Fatalf("write_timeout_sec %d, lease_ttl_sec %g; want 10, 2.5", c.Limits.WriteTimeoutSec, c.Cluster.Redis.LeaseTTLSec)
	}
	t.Setenv("IOP_TRACING_ENABLED", "yes")
	t.Setenv("IOP_LIMITS_IDLE_TIMEOUT_SEC", "0x10")
	_, err = LoadEdge(f)
	for _, want := range []string{"'tracing.enabled' must be true or false", "'limits.idle_timeout_sec' must be a whole number"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}

// A misspelt top-level key is reported as such, not under the Go type the
// file is decoded into.
func TestUnknownTopLevelKeyNamed(t *testing.T) {
	_, err := LoadEdge(writeFile(t, "edge.yaml", decodeBase+"listn: {http: 'h:1'}\n"))
	if err == nil || !strings.Contains(err.Error(), "top level has invalid keys: listn") || strings.Contains(err.Error(), "config.Edge") {
		t.Errorf("err = %v", err)
	}
	_, err = LoadNode(writeFile(t, "node.yaml", "edge: {address: 'e:1'}\nnode: {id: a, token: t}\nreconect: {interval_sec: 1}\n"))
	if err == nil || !strings.Contains(err.Error(), "top level has invalid keys: reconect") {
		t.Errorf("err = %v", err)
	}
}
