package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// Durations that are not numbers (.nan, .inf) or so large that they
// overflow time.Duration or the wire's fields, and capacities beyond the
// wire's int32, are refused, each named, all at once.
func TestEdgeNonsenseNumbersRefused(t *testing.T) {
	f := writeFile(t, "edge.yaml", `
limits: {write_timeout_sec: 9223372036854775807, read_timeout_sec: 99999999999, stream_idle_timeout_sec: 10000000000}
tracing: {sample_ratio: .nan}
cluster: {redis: {address: "r:6379", lease_ttl_sec: .nan}}
nodes:
  - id: a
    token: t
    heartbeat_interval_sec: .nan
    load_report_interval_sec: .nan
    providers: [{name: p, type: mock, capacity: 4294967297, timeout_sec: 5000000}]
  - id: b
    token: t
    heartbeat_interval_sec: 1e300
    providers: [{name: p, type: mock}]
models:
  - name: m
    queue_timeout_sec: .inf
    offline_grace_sec: .nan
    providers: [{node: a, provider: p, target: x}]
`)
	_, err := LoadEdge(f)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"limits.write_timeout_sec must be a number of seconds of at most",
		"limits.read_timeout_sec must be a number of seconds of at most",
		"limits.stream_idle_timeout_sec must be a number of seconds of at most",
		"tracing.sample_ratio must be between 0 and 1",
		"cluster.redis.lease_ttl_sec must be between 1 and 3600",
		"nodes[0].heartbeat_interval_sec must be a number of seconds",
		"nodes[0].heartbeat_timeout_sec must exceed heartbeat_interval_sec",
		"nodes[0].load_report_interval_sec must be 0 (none) or between 0.2 and 3600",
		"nodes[0].providers[0].capacity must be at most 1000000",
		"nodes[0].providers[0].timeout_sec must be a number of seconds",
		"nodes[1].heartbeat_interval_sec must be a number of seconds",
		"models[0].queue_timeout_sec must be a number of seconds",
		"models[0].offline_grace_sec must be a number of seconds",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
	// The bound itself is accepted.
	c := minimalEdge()
	c.Limits.ResponseTimeoutSec = MaxSeconds
	c.Nodes[0].Providers[0].Capacity = MaxCapacity
	if err := c.Normalize(); err != nil {
		t.Fatalf("bounds refused: %v", err)
	}
}

func TestNodeNonsenseIntervalRefused(t *testing.T) {
	for _, v := range []string{".nan", ".inf", "1e20"} {
		f := writeFile(t, "node.yaml", "edge: {address: 'e:7070'}\nnode: {id: a, token: t}\nreconnect: {interval_sec: "+v+"}\n")
		if _, err := LoadNode(f); err == nil || !strings.Contains(err.Error(), "reconnect.interval_sec") {
			t.Errorf("interval_sec %s: err = %v", v, err)
		}
	}
}

// A problem never quotes credentials: a URL with user:password@ where an
// address or base_url belongs is reported by key, and neither the error
// (printed by --check-config, logged by a rejected reload) nor a log line
// carrying it holds the secret.
func TestProblemsNeverQuoteCredentials(t *testing.T) {
	edge := writeFile(t, "edge.yaml", `
cluster: {redis: {address: "redis://:sk-REDIS-SECRET@r:6379"}}
listen: {http: "admin:sk-HTTP-SECRET@127.0.0.1:8080"}
nodes:
  - id: a
    token: t
    providers: [{name: p, type: vllm, base_url: "htp://user:sk-URL-SECRET@h/v1"}, {name: q, type: vllm, base_url: "http://sk-BAD SECRET@h/v1"}]
models:
  - name: m
    providers: [{node: a, provider: p, target: x}]
`)
	node := writeFile(t, "node.yaml", "edge: {address: 'tok-EDGE-SECRET@e:7070'}\nnode: {id: a, token: t}\n")
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	var all strings.Builder
	for _, load := range []func() error{
		func() error { _, err := LoadEdge(edge); return err },
		func() error { _, err := LoadNode(node); return err },
	} {
		err := load()
		if err == nil {
			t.Error("a config with a URL for an address was accepted")
			continue
		}
		log.Warn("reload rejected; config unchanged", zap.Error(err))
		all.WriteString(err.Error())
	}
	for _, e := range logs.All() {
		all.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			all.WriteString(k)
			all.WriteString(" ")
			fmt.Fprint(&all, v)
		}
	}
	out := all.String()
	if strings.Contains(out, "SECRET") {
		t.Errorf("a secret reached the problems or the log:\n%s", out)
	}
	for _, want := range []string{"cluster.redis.address", "listen.http", "providers[0].base_url", "providers[1].base_url", "edge.address"} {
		if !strings.Contains(out, want) {
			t.Errorf("problems lack %q:\n%s", want, out)
		}
	}
}

// A key of the wrong type does not hide the other problems: decoding and
// validation problems are listed together, one per key.
func TestTypeErrorsAndProblemsTogether(t *testing.T) {
	f := writeFile(t, "edge.yaml", `
listen: {http: nope}
limits: {write_timeout_sec: abc, read_timeout_sec: [1]}
unknown_key: 1
nodes:
  - id: a
    providers: [{name: p, type: mock, tool_mode: bogus}]
models:
  - name: m
    providers: [{node: a, provider: p, target: x}]
`)
	_, err := LoadEdge(f)
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *ProblemsError", err)
	}
	for _, want := range []string{
		"limits.write_timeout_sec",
		"limits.read_timeout_sec",
		"unknown_key",
		`listen.http "nope" is not host:port`,
		"nodes[0].token (or token_env) is required",
		`tool_mode "bogus"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
	if len(pe.Problems) != 6 {
		t.Errorf("%d problems, want 6, one per key:\n%v", len(pe.Problems), err)
	}
	if pe.File != f {
		t.Errorf("file %q, want %q", pe.File, f)
	}
	// An unreadable file is still one error.
	if _, err := LoadEdge(writeFile(t, "bad.yaml", "{{{\n")); err == nil {
		t.Fatal("unparsable YAML accepted")
	}
}

// A Redis timeout over a fifth of the lease TTL is refused: the renewals,
// every TTL/3 from a loop that may spend three calls' timeouts, would
// otherwise arrive after a slow but answering Redis expired live leases.
func TestClusterTimeoutWithinTTL(t *testing.T) {
	for _, tc := range []struct {
		redis string
		ok    bool
	}{
		{`{address: "r:6379", lease_ttl_sec: 1, timeout_ms: 500}`, false},
		{`{address: "r:6379", lease_ttl_sec: 1}`, true}, // the default 200 ms
		{`{address: "r:6379", lease_ttl_sec: 15, timeout_ms: 3000}`, true},
		{`{address: "r:6379", lease_ttl_sec: 15, timeout_ms: 3001}`, false},
	} {
		f := writeFile(t, "edge.yaml", "cluster: {redis: "+tc.redis+"}\n")
		_, err := LoadEdge(f)
		if got := err == nil; got != tc.ok {
			t.Errorf("%s: accepted %v, want %v (%v)", tc.redis, got, tc.ok, err)
		}
		if err != nil && !strings.Contains(err.Error(), "cluster.redis.timeout_ms") {
			t.Errorf("%s: problems %v lack cluster.redis.timeout_ms", tc.redis, err)
		}
	}
}
