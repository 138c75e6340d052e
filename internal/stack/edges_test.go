package stack

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
)

func oneNodeCluster() *config.Edge {
	return &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "ta", HeartbeatIntervalSec: 0.05, HeartbeatTimeoutSec: 1,
			Providers: []config.ProviderSpec{{Name: "m", Type: "mock", Capacity: 2}}}},
		Models: []config.ModelSpec{{Name: "demo", Providers: []config.ModelProvider{{Node: "a", Provider: "m", Target: "x"}}}},
	}
}

func chat(t *testing.T, e *Edge) (int, string) {
	t.Helper()
	resp, err := http.Post(e.URL+"/v1/chat/completions", "application/json",
		bytes.NewReader([]byte(`{"model":"demo","messages":[{"role":"user","content":"one two"}]}`)))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A node given several edges keeps a session with each, each with its own
// ready and fencing; one edge going away leaves the session with the other
// undisturbed.
func TestNodeServesEveryEdge(t *testing.T) {
	ea := StartEdge(t, oneNodeCluster(), EdgeOptions{})
	eb := StartEdge(t, oneNodeCluster(), EdgeOptions{})
	StartNode(t, ea.NodeAddr, "a", NodeOptions{Token: "ta", MoreEdges: []string{eb.NodeAddr}})
	ea.WaitReady(t, "a", 10*time.Second)
	eb.WaitReady(t, "a", 10*time.Second)
	for _, e := range []*Edge{ea, eb} {
		if code, body := chat(t, e); code != http.StatusOK || !strings.Contains(body, "one two") {
			t.Fatalf("edge %s: %d %s", e.URL, code, body)
		}
	}
	ea.Close()
	// The session with b stays the one it was: no loss, no new session.
	time.Sleep(300 * time.Millisecond) // several heartbeat intervals
	if code, body := chat(t, eb); code != http.StatusOK {
		t.Fatalf("edge b after a went away: %d %s", code, body)
	}
	if lost := counter(t, eb, "iop_node_sessions_total", "lost"); lost != 0 {
		t.Fatalf("edge b lost the node's session %v times", lost)
	}
	if ready := counter(t, eb, "iop_node_sessions_total", "ready"); ready != 1 {
		t.Fatalf("edge b saw %v ready sessions, want 1", ready)
	}
}

func counter(t *testing.T, e *Edge, name, outcome string) float64 {
	t.Helper()
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
