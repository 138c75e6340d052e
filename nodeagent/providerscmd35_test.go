package nodeagent

import (
	"context"
	"testing"

	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	"github.com/iop-gateway/iop/nodeagent/openaicompat"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The providers command answers health by the names /admin/status shows
// ("ok", "offline", "draining"), not the proto enum's number, over the
// real command path: an edge's command on a live session. A vLLM
// provider whose server is not there (a closed port) is offline.
func TestProvidersCommandNamesHealth(t *testing.T) {
	fe := startFakeEdge(t, &iop.NodeConfigPayload{
		Adapters: []*iop.AdapterConfig{
			{Name: "m", Type: "mock", Category: "api", Capacity: 1},
			{Name: "v", Type: "vllm", Category: "api", Capacity: 1, BaseUrl: "http://" + closedAddr(t) + "/v1"},
		},
		Heartbeat: &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 1000},
	}, nil)
	agent := NewAgent(map[string]adapter.Factory{"mock": mock.New, "vllm": openaicompat.NewVLLM},
		adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(agent.Close)
	c := startNode(t, fe, agent)

	health := func() map[string]any {
		t.Helper()
		out := map[string]any{}
		for _, p := range command(t, c, CmdProviders)["providers"].([]any) {
			p := p.(map[string]any)
			out[p["provider_id"].(string)] = p["health"]
		}
		return out
	}
	got := health()
	if got["m"] != "ok" || got["v"] != "offline" {
		t.Fatalf("providers command health %v, want m ok and v offline (by name)", got)
	}
	// The same names as the status API renders for the same states.
	for _, s := range agent.Snapshots(context.Background()) {
		if want := dispatch.HealthName(s.GetHealth()); got[s.GetProviderId()] != want {
			t.Errorf("provider %s: health %v, the status API says %q", s.GetProviderId(), got[s.GetProviderId()], want)
		}
	}

	// Draining shows as draining on every provider.
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no wait for streams: none are open
	_ = agent.Drain(ctx)
	if got := health(); got["m"] != "draining" || got["v"] != "draining" {
		t.Fatalf("providers command health while draining %v, want draining", got)
	}
}
