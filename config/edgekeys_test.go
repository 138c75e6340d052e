package config

import (
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The per-request, heartbeat, queue, provider and cluster keys get their
// documented defaults when omitted.
func TestEdgeDefaultsOfOmittedKeys(t *testing.T) {
	c := minimalEdge()
	c.Nodes[0].Providers = []ProviderSpec{{Type: "mock", Capacity: 4}}
	c.Models[0].Providers[0].Provider = "mock"
	c.Nodes = append(c.Nodes, NodeSpec{ID: "b", Token: "t", HeartbeatIntervalSec: 2})
	c.Cluster.Redis.Address = "r:6379"
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	n, pr, m, r := c.Nodes[0], c.Nodes[0].Providers[0], c.Models[0], c.Cluster.Redis
	checks := map[string][2]any{
		"limits.write_timeout_sec":            {c.Limits.WriteTimeoutSec, 30},
		"limits.response_timeout_sec":         {c.Limits.ResponseTimeoutSec, 300},
		"nodes[0].heartbeat_interval_sec":     {n.HeartbeatIntervalSec, 5.0},
		"nodes[0].heartbeat_timeout_sec":      {n.HeartbeatTimeoutSec, 15.0},
		"nodes[1].heartbeat_timeout_sec (3x)": {c.Nodes[1].HeartbeatTimeoutSec, 6.0},
		"nodes[0].load_report_interval":       {n.LoadReportInterval().Seconds(), 2.0},
		"providers[0].name":                   {pr.Name, "mock"},
		"providers[0].long_capacity":          {pr.LongCapacity, 4},
		"providers[0].tool_mode":              {pr.ToolMode, "auto"},
		"providers[0] wire tool mode":         {pr.WireToolMode(), iop.ToolMode_TOOL_MODE_AUTO},
		"models[0].queue_timeout_sec":         {m.QueueTimeoutSec, 30.0},
		"models[0].max_queue":                 {m.MaxQueue, 256},
		"cluster.redis.lease_ttl_sec":         {r.LeaseTTLSec, 15.0},
		"cluster.redis.timeout_ms":            {r.TimeoutMS, 200},
	}
	for k, v := range checks {
		if v[0] != v[1] {
			t.Errorf("%s = %v, want %v", k, v[0], v[1])
		}
	}
}

// Bounds are inclusive where the documentation says "between" or "at
// least", and exclusive where it says "exceed".
func TestEdgeBoundsAtTheirEdges(t *testing.T) {
	c := minimalEdge()
	c.Auth.APIKeys = []string{"k1", "k2"}
	c.Auth.KeyPriorities = []KeyPriority{{Key: "k1", Priority: MaxPriority}, {Key: "k2", Priority: MinPriority}}
	c.Limits.MaxBodyBytes = MaxWireBodyBytes
	lr := 0.2
	c.Nodes[0].LoadReportIntervalSec = &lr
	c.Models[0].MaxAttempts = MaxMaxAttempts
	if err := c.Normalize(); err != nil {
		t.Fatalf("values at their bounds refused: %v", err)
	}
	c = minimalEdge()
	c.Nodes[0].HeartbeatIntervalSec, c.Nodes[0].HeartbeatTimeoutSec = 5, 5
	if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), "nodes[0].heartbeat_timeout_sec must exceed heartbeat_interval_sec") {
		t.Fatalf("a timeout equal to the interval: err = %v", err)
	}
}

// A model named twice, a node-wire certificate without its key (or a
// client CA without either) are refused by name, all at once.
func TestEdgeHalfConfiguredKeysRefused(t *testing.T) {
	c := minimalEdge()
	c.Models = append(c.Models, c.Models[0])
	c.Listen.TLS = ServerTLS{CertFile: "edge.crt"}
	err := c.Normalize()
	for _, want := range []string{`models[1].name "m" is duplicated`, "listen.tls: cert_file and key_file must be set together"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v lack %q", err, want)
		}
	}
	c = minimalEdge()
	c.Listen.TLS = ServerTLS{ClientCAFile: "ca.crt"}
	if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), "listen.tls.client_ca_file needs cert_file and key_file") {
		t.Errorf("client CA alone: err = %v", err)
	}
}

// cluster.redis.password_env is resolved into the password the ledger
// dials with.
func TestClusterRedisPasswordFromEnv(t *testing.T) {
	t.Setenv("IOP_TEST_REDIS_PW", "pw-value")
	c := minimalEdge()
	c.Cluster.Redis = ClusterRedis{Address: "r:6379", PasswordEnv: "IOP_TEST_REDIS_PW"}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if c.Cluster.Redis.Password != "pw-value" {
		t.Fatalf("password not resolved from password_env")
	}
}

// A port beyond 65535 and a base_url without a host are refused.
func TestEdgeAddressesAndURLsChecked(t *testing.T) {
	c := minimalEdge()
	c.Listen.HTTP = "127.0.0.1:65536"
	c.Nodes[0].Providers[0].BaseURL = "http:///v1"
	err := c.Normalize()
	for _, want := range []string{`listen.http "127.0.0.1:65536" has a bad port`, `nodes[0].providers[0].base_url "http:///v1" must be an http(s) URL`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v lack %q", err, want)
		}
	}
	c = minimalEdge()
	c.Listen.HTTP = "127.0.0.1:65535"
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
}

// Adapter settings reach the node as the text the file shows: numbers in
// plain decimal (never 1e-06 or 1e+21), lists and maps as JSON.
func TestProviderSettingsAsText(t *testing.T) {
	p := ProviderSpec{Extra: map[string]any{
		"min_p": 0.000001, "big": 1e21, "num_ctx": 8192, "think": true, "name": "x",
		"stop": []any{"a", "b"},
	}}
	got := p.Settings()
	want := map[string]string{"min_p": "0.000001", "big": "1000000000000000000000", "num_ctx": "8192", "think": "true", "name": "x", "stop": `["a","b"]`}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// The providers each node must serve are listed sorted, once each, so a
// node's config payload does not change with the order models list them.
func TestReferencedProvidersSorted(t *testing.T) {
	c := &Edge{Models: []ModelSpec{
		{Providers: []ModelProvider{{Node: "a", Provider: "z"}, {Node: "a", Provider: "b"}}},
		{Providers: []ModelProvider{{Node: "a", Provider: "m"}, {Node: "a", Provider: "b"}, {Node: "c", Provider: "q"}}},
	}}
	got := c.ReferencedProviders()
	if strings.Join(got["a"], ",") != "b,m,z" || strings.Join(got["c"], ",") != "q" || len(got) != 2 {
		t.Fatalf("referenced = %v", got)
	}
}

// A model's candidates must name a configured node, a provider of that
// node, once each, with a target; a cli workspace must stay below the
// node's workspace_root.
func TestModelCandidatesChecked(t *testing.T) {
	c := minimalEdge()
	c.Models[0].Workspace = "../outside"
	c.Models[0].Providers = []ModelProvider{
		{Node: "a", Provider: "p", Target: "x"},
		{Node: "a", Provider: "p", Target: "x"},
		{Node: "a", Provider: "nope", Target: "x"},
		{Node: "ghost", Provider: "p", Target: "x"},
		{Node: "a", Provider: "p"},
	}
	c.Models = append(c.Models,
		ModelSpec{Name: "abs", Workspace: "/srv/ws", Providers: []ModelProvider{{Node: "a", Provider: "p", Target: "x"}}},
		// A node on Windows would read the backslashes as separators.
		ModelSpec{Name: "win", Workspace: `ws\..\..\outside`, Providers: []ModelProvider{{Node: "a", Provider: "p", Target: "x"}}})
	err := c.Normalize()
	for _, want := range []string{
		`models[0].workspace "../outside" must be a relative path`,
		"models[0].providers[1]: a/p is listed twice",
		`models[0].providers[2].provider "nope" is not a provider of node "a"`,
		`models[0].providers[3].node "ghost" is not a configured node`,
		"models[0].providers[4].target is required",
		`models[1].workspace "/srv/ws" must be a relative path`,
		`models[2].workspace "ws\\..\\..\\outside" must be a relative path`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v lack %q", err, want)
		}
	}
}
