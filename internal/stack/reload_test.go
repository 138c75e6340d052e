package stack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
)

const reloadBase = `
nodes:
  - id: a
    token: ta
    providers:
      - {name: m, type: mock, capacity: 1}
  - id: b
    token: tb
    providers:
      - {name: m, type: mock, capacity: 1}
models:
  - name: demo
    providers:
      - {node: a, provider: m, target: x}
      - {node: b, provider: m, target: x}
`

// reloadEdge starts an edge from a config file and serves POST /admin/reload
// exactly as iop-edge does: validate, swap, push refreshes.
func reloadEdge(t *testing.T, yaml string) (*Edge, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadEdge(file)
	if err != nil {
		t.Fatal(err)
	}
	e := StartEdge(t, cfg, EdgeOptions{ConfigFile: file})
	StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "ta"})
	StartNode(t, e.NodeAddr, "b", NodeOptions{Token: "tb"})
	e.WaitReady(t, "a", 10*time.Second)
	e.WaitReady(t, "b", 10*time.Second)
	return e, file
}

func postReload(t *testing.T, e *Edge) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(e.URL+"/admin/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("reload answer %q: %v", b, err)
	}
	return resp.StatusCode, out
}

func capacities(e *Edge) map[string]int32 {
	out := map[string]int32{}
	for _, n := range e.Dispatcher.Status().Nodes {
		for _, p := range n.Providers {
			out[n.ID+"/"+p.ProviderId] = p.Capacity
		}
	}
	return out
}

func TestReloadGoodConfigRefreshesNodes(t *testing.T) {
	e, file := reloadEdge(t, reloadBase)
	next := strings.Replace(reloadBase, "{name: m, type: mock, capacity: 1}\n  - id: b", "{name: m, type: mock, capacity: 3}\n  - id: b", 1)
	// Also add a provider to node b: it goes live once b applied the refresh.
	next = strings.Replace(next, "      - {name: m, type: mock, capacity: 1}\nmodels:", "      - {name: m, type: mock, capacity: 1}\n      - {name: m2, type: mock, capacity: 2}\nmodels:", 1)
	next += "  - name: demo2\n    providers:\n      - {node: b, provider: m2, target: y}\n"
	if err := os.WriteFile(file, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := postReload(t, e)
	nodes := out["nodes"].(map[string]any)
	if code != 200 || nodes["a"] != "applied" || nodes["b"] != "applied" {
		t.Fatalf("reload: %d %v", code, out)
	}
	if c := capacities(e); c["a/m"] != 3 || c["b/m2"] != 2 {
		t.Fatalf("capacities after reload: %v", c)
	}
	snaps := e.Dispatcher.Status()
	for _, n := range snaps.Nodes {
		for _, p := range n.Providers {
			if p.Status != "available" {
				t.Fatalf("%s/%s is %s after reload", n.ID, p.ProviderId, p.Status)
			}
		}
	}
	// The new model is served by the new provider.
	resp, err := http.Post(e.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"demo2","messages":[{"role":"user","content":"new provider"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("demo2 after reload: %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestReloadBadConfigChangesNothing(t *testing.T) {
	e, file := reloadEdge(t, reloadBase)
	before := capacities(e)
	bad := strings.Replace(reloadBase, "capacity: 1}\n  - id: b", "capacity: -4}\n  - id: b", 1)
	bad = strings.Replace(bad, "target: x}\n      - {node: b", "target: \"\"}\n      - {node: b", 1)
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := postReload(t, e)
	msg := out["error"].(map[string]any)["message"].(string)
	if code != 400 || !strings.Contains(msg, "capacity must be positive") || !strings.Contains(msg, "target is required") {
		t.Fatalf("bad reload: %d %v", code, out)
	}
	if after := capacities(e); after["a/m"] != before["a/m"] {
		t.Fatalf("bad reload changed capacities: %v -> %v", before, after)
	}
}

// One node accepts the new config, the other rejects it: each result is
// reported, and the rejecting node keeps serving its old config.
func TestReloadPartialNodeFailure(t *testing.T) {
	e, file := reloadEdge(t, reloadBase)
	next := strings.Replace(reloadBase, "{name: m, type: mock, capacity: 1}\n  - id: b", "{name: m, type: mock, capacity: 2}\n  - id: b", 1)
	// Valid for the edge, invalid for node b's mock adapter.
	next = strings.Replace(next, "      - {name: m, type: mock, capacity: 1}\nmodels:", "      - {name: m, type: mock, capacity: 1, delay_ms: \"-5\"}\nmodels:", 1)
	if err := os.WriteFile(file, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := postReload(t, e)
	nodes := out["nodes"].(map[string]any)
	if code != 200 || nodes["a"] != "applied" || nodes["b"] != "failed" {
		t.Fatalf("partial reload: %d %v", code, out)
	}
	// b still serves with its old config.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := e.Dispatcher.NodeCommand(ctx, "b", "providers")
	if err != nil || len(resp.GetProviders()) != 1 {
		t.Fatalf("b providers: %v %v", resp, err)
	}
}

// nodeVersions returns node id's running and desired config versions.
func nodeVersions(e *Edge, id string) (running, desired string) {
	for _, n := range e.Dispatcher.Status().Nodes {
		if n.ID == id {
			return n.ConfigVersion, n.DesiredConfigVersion
		}
	}
	return "", ""
}

// A node that refuses a new config (FAILED) keeps its old one on both
// sides: the edge keeps routing by the old capacity, and says which config
// the node runs.
func TestReloadFailedKeepsBothSidesOnTheOldConfig(t *testing.T) {
	e, file := reloadEdge(t, reloadBase)
	before, _ := nodeVersions(e, "b")
	// b: capacity 1 -> 3, but with a setting its mock adapter refuses.
	next := strings.Replace(reloadBase, "      - {name: m, type: mock, capacity: 1}\nmodels:", "      - {name: m, type: mock, capacity: 3, delay_ms: \"-5\"}\nmodels:", 1)
	if err := os.WriteFile(file, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := postReload(t, e); code != 200 || out["nodes"].(map[string]any)["b"] != "failed" {
		t.Fatalf("reload: %d %v", code, out)
	}
	if c := capacities(e); c["b/m"] != 1 {
		t.Fatalf("the edge uses capacity %d for b/m, which b does not run (want its old 1)", c["b/m"])
	}
	running, desired := nodeVersions(e, "b")
	if running != before || desired == before {
		t.Fatalf("b runs %q (before %q), desired %q: the status must show the node on its old config", running, before, desired)
	}
	if v := metricValue(t, e, "iop_node_config_current", "b"); v != 0 {
		t.Fatalf("iop_node_config_current{node=b} = %v, want 0", v)
	}
	// Fixing the config and reloading again pushes to b (its earlier
	// refresh failed) and brings both sides to it.
	fixed := strings.Replace(next, `, delay_ms: "-5"`, "", 1)
	if err := os.WriteFile(file, []byte(fixed), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := postReload(t, e); code != 200 || out["nodes"].(map[string]any)["b"] != "applied" {
		t.Fatalf("second reload: %d %v", code, out)
	}
	if c := capacities(e); c["b/m"] != 3 {
		t.Fatalf("after applying: b/m capacity %d, want 3", c["b/m"])
	}
	if running, desired := nodeVersions(e, "b"); running != desired {
		t.Fatalf("after applying: running %q desired %q", running, desired)
	}
}

// A change the node can only make in a new session (a provider changing
// type) restarts that session: the edge fences the old generation at once
// and the node comes back on the new config; never does the edge route by
// the new type to the node's old adapter.
func TestReloadRestartRequiredReconnectsOnTheNewConfig(t *testing.T) {
	e, file := reloadEdge(t, reloadBase)
	next := strings.Replace(reloadBase, "      - {name: m, type: mock, capacity: 1}\nmodels:", "      - {name: m, type: cli, capacity: 1, command: [cat]}\nmodels:", 1)
	next += "  - name: echo-b\n    providers:\n      - {node: b, provider: m, target: default}\n"
	if err := os.WriteFile(file, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := postReload(t, e); code != 200 || out["nodes"].(map[string]any)["b"] != "restart_required" {
		t.Fatalf("reload: %d %v", code, out)
	}
	WaitFor(t, 10*time.Second, "b to reconnect on the new config", func() bool {
		running, desired := nodeVersions(e, "b")
		return running != "" && running == desired && connected(e, "b")
	})
	resp, err := http.Post(e.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"echo-b","messages":[{"role":"user","content":"cat says this"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "cat says this") {
		t.Fatalf("echo-b through the cli provider: %d %s", resp.StatusCode, b)
	}
	if v := metricValue(t, e, "iop_node_sessions_total", "b"); v < 2 {
		t.Fatalf("b's sessions: %v, want a second one", v)
	}
}

func connected(e *Edge, id string) bool {
	for _, n := range e.Dispatcher.Status().Nodes {
		if n.ID == id {
			return n.Connected
		}
	}
	return false
}

// metricValue sums the series of name whose node label is node.
func metricValue(t *testing.T, e *Edge, name, node string) float64 {
	t.Helper()
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "node" && l.GetValue() == node {
					sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
