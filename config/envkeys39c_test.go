package config

import (
	"slices"
	"testing"
)

// Every scalar key CONTRACT §3 and §4 name is overridden by IOP_ + its
// upper-cased path with _ for ., over the value the file gives: a key
// whose variable were spelt otherwise (or not bound at all) would keep
// the file's value.
func TestContractKeysOverriddenFromEnv(t *testing.T) {
	edgeFile := writeFile(t, "edge.yaml", `
listen:
  http: 127.0.0.1:1
  node: 127.0.0.1:2
  max_pending_handshakes: 3
auth:
  api_keys: [file-key]
  admin_token: file-admin
limits:
  read_timeout_sec: 4
  stream_idle_timeout_sec: 5
cluster:
  redis:
    address: file-redis:1
`+decodeBase)
	for k, v := range map[string]string{
		"IOP_LISTEN_HTTP":                    "127.0.0.1:18080",
		"IOP_LISTEN_NODE":                    "127.0.0.1:17070",
		"IOP_LISTEN_MAX_PENDING_HANDSHAKES":  "33",
		"IOP_AUTH_API_KEYS":                  "k1,k2",
		"IOP_AUTH_ADMIN_TOKEN":               "env-admin",
		"IOP_LIMITS_READ_TIMEOUT_SEC":        "44",
		"IOP_LIMITS_STREAM_IDLE_TIMEOUT_SEC": "0",
		"IOP_CLUSTER_REDIS_ADDRESS":          "env-redis:6379",
	} {
		t.Setenv(k, v)
	}
	e, err := LoadEdge(edgeFile)
	if err != nil {
		t.Fatal(err)
	}
	if e.Listen.HTTP != "127.0.0.1:18080" || e.Listen.Node != "127.0.0.1:17070" || e.Listen.MaxPendingHandshakes != 33 {
		t.Errorf("listen: http %q node %q max_pending_handshakes %d", e.Listen.HTTP, e.Listen.Node, e.Listen.MaxPendingHandshakes)
	}
	if !slices.Equal(e.Auth.APIKeys, []string{"k1", "k2"}) || e.Auth.AdminToken != "env-admin" {
		t.Errorf("auth: api_keys %q admin_token %q", e.Auth.APIKeys, e.Auth.AdminToken)
	}
	if e.Limits.ReadTimeoutSec != 44 || e.Limits.StreamIdleTimeout() != 0 {
		t.Errorf("limits: read_timeout_sec %d stream idle %v", e.Limits.ReadTimeoutSec, e.Limits.StreamIdleTimeout())
	}
	if e.Cluster.Redis.Address != "env-redis:6379" {
		t.Errorf("cluster.redis.address %q", e.Cluster.Redis.Address)
	}

	nodeFile := writeFile(t, "node.yaml", `
edge:
  address: file-edge:1
  tls: {enabled: false, server_name: file-name}
node: {id: file-id, token: file-token}
reconnect: {interval_sec: 1, max_attempts: 1}
store_dir: ./file-store
workspace_root: ./file-ws
`)
	for k, v := range map[string]string{
		"IOP_EDGE_ADDRESS":           "env-edge:7070",
		"IOP_EDGE_TLS_ENABLED":       "true",
		"IOP_EDGE_TLS_SERVER_NAME":   "env-name",
		"IOP_NODE_ID":                "env-id",
		"IOP_NODE_TOKEN":             "env-token",
		"IOP_RECONNECT_INTERVAL_SEC": "2.5",
		"IOP_RECONNECT_MAX_ATTEMPTS": "0",
		"IOP_STORE_DIR":              "./env-store",
		"IOP_WORKSPACE_ROOT":         "./env-ws",
	} {
		t.Setenv(k, v)
	}
	n, err := LoadNode(nodeFile)
	if err != nil {
		t.Fatal(err)
	}
	if n.Edge.Address != "env-edge:7070" || !n.Edge.TLS.Enabled || n.Edge.TLS.ServerName != "env-name" {
		t.Errorf("edge: address %q tls.enabled %v tls.server_name %q", n.Edge.Address, n.Edge.TLS.Enabled, n.Edge.TLS.ServerName)
	}
	if n.Node.ID != "env-id" || n.Node.Token != "env-token" {
		t.Errorf("node: id %q token %q", n.Node.ID, n.Node.Token)
	}
	if n.Reconnect.IntervalSec == nil || *n.Reconnect.IntervalSec != 2.5 || n.Reconnect.MaxAttempts == nil || *n.Reconnect.MaxAttempts != 0 {
		t.Errorf("reconnect: interval_sec %v max_attempts %v", n.Reconnect.IntervalSec, n.Reconnect.MaxAttempts)
	}
	if n.StoreDir == "./file-store" || n.WorkspaceRoot == "./file-ws" {
		t.Errorf("store_dir %q workspace_root %q kept the file's values", n.StoreDir, n.WorkspaceRoot)
	}

	// edge.addresses (the cluster form) from a comma list, in place of
	// edge.address.
	t.Setenv("IOP_EDGE_ADDRESS", "")
	t.Setenv("IOP_EDGE_ADDRESSES", "e1:7070,e2:7070")
	n, err = LoadNode(writeFile(t, "node2.yaml", "node: {id: a, token: t}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.Edge.Targets(), []string{"e1:7070", "e2:7070"}) {
		t.Errorf("edge.addresses %q", n.Edge.Targets())
	}
}
