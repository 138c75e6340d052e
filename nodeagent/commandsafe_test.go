package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The capabilities answer says an adapter's model list failed, but never
// in the upstream's own words (a rejected key quoted back) nor with
// transport text naming the backend's address: the answer reaches the
// Edge's admin API.
func TestCapabilitiesErrorCarriesNoSecretOrAddress(t *testing.T) {
	const key = "sk-live-4f3c9a0e7b"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided: ` + key + `","type":"invalid_request_error"}}`))
	}))
	defer up.Close()
	down := closedAddr(t)
	payload := &iop.NodeConfigPayload{
		Adapters: []*iop.AdapterConfig{
			{Name: "denied", Type: "openai_compat", Category: "api", Capacity: 1, BaseUrl: up.URL + "/v1"},
			{Name: "gone", Type: "openai_compat", Category: "api", Capacity: 1, BaseUrl: "http://" + down + "/v1"},
		},
		Heartbeat: &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 2000},
	}
	c := startNode(t, startFakeEdge(t, payload, nil), fullAgent(t))
	caps := command(t, c, CmdCapabilities)
	raw, _ := json.Marshal(caps)
	for _, secret := range []string{key, down, strings.TrimPrefix(up.URL, "http://")} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("capabilities answer shows %q: %s", secret, raw)
		}
	}
	for _, ad := range caps["adapters"].([]any) {
		if e, _ := ad.(map[string]any)["error"].(string); e == "" {
			t.Errorf("adapter %v: no error reported for its failed model list", ad)
		}
	}
}

// crowded is an adapter with more CLI-style sessions and more models than
// one answer frame could carry.
type crowded struct {
	adapter.Instance
	sessions []adapter.SessionInfo
	models   []string
}

func (c *crowded) Sessions() []adapter.SessionInfo          { return slices.Clone(c.sessions) }
func (c *crowded) TerminateSession(string) error            { return nil }
func (c *crowded) Models(context.Context) ([]string, error) { return c.models, nil }

// The sessions and capabilities answers stay bounded: a node whose
// sessions (or a backend's model list) would not fit one frame still
// answers, with the list cut short and marked so.
func TestCommandAnswersAreBounded(t *testing.T) {
	const n = 100_000
	cr := &crowded{}
	for i := range n {
		id := fmt.Sprintf("%0128d", i)
		cr.sessions = append(cr.sessions, adapter.SessionInfo{ID: id, Adapter: "c", LastUsedUnix: int64(i), Running: boolInt(i == 7)})
		cr.models = append(cr.models, "model-"+id)
	}
	a := NewAgent(map[string]adapter.Factory{
		"crowded": func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
			c := proto.Clone(cfg).(*iop.AdapterConfig)
			c.Type = "mock"
			in, err := mock.New(c, env)
			cr.Instance = in
			return cr, err
		},
	}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	payload := &iop.NodeConfigPayload{
		Adapters: []*iop.AdapterConfig{{Name: "c", Type: "crowded", Category: "cli", Capacity: 1}},
		// A generous timeout: building two answers from 100,000 entries
		// under -race on a loaded 2-core machine has kept both ends from
		// their heartbeats for over 2 s, losing the session.
		Heartbeat: &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 30000},
	}
	c := startNode(t, startFakeEdge(t, payload, nil), a)

	s := command(t, c, CmdSessions)
	list := s["sessions"].([]any)
	if len(list) != maxCommandSessions || s["truncated"] != true || s["total"].(float64) != n {
		t.Fatalf("sessions: %d listed, truncated %v, total %v", len(list), s["truncated"], s["total"])
	}
	if first := list[0].(map[string]any); first["running"].(float64) != 1 {
		t.Fatalf("sessions: the running session is not kept first: %v", first)
	}
	caps := command(t, c, CmdCapabilities)["adapters"].([]any)[0].(map[string]any)
	if len(caps["models"].([]any)) != maxCommandModels || caps["models_truncated"] != true {
		t.Fatalf("capabilities: %d models, truncated %v", len(caps["models"].([]any)), caps["models_truncated"])
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
