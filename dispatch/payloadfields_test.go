package dispatch

import (
	"maps"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// The payload a node receives carries what the edge's config says of it:
// its heartbeat interval and timeout (the node's own liveness check of
// the edge), its load report interval, and each provider's capacities,
// headers and adapter settings.
func TestNodePayloadCarriesTheNodesConfig(t *testing.T) {
	every := 0.5
	spec := &config.NodeSpec{ID: "n", HeartbeatIntervalSec: 4, HeartbeatTimeoutSec: 13, LoadReportIntervalSec: &every,
		Providers: []config.ProviderSpec{{Name: "p", Type: "vllm", Capacity: 3, LongCapacity: 1, BaseURL: "http://127.0.0.1:9/v1",
			Headers: map[string]string{"X-A": "1"}, Extra: map[string]any{"kill_grace_ms": 2500}}}}
	p := NodePayload(spec)
	if hb := p.GetHeartbeat(); hb.GetIntervalMs() != 4000 || hb.GetTimeoutMs() != 13000 {
		t.Fatalf("heartbeat %v, want interval 4000 ms and timeout 13000 ms", hb)
	}
	if got := p.GetRuntime().GetLoadReportIntervalMs(); got != 500 {
		t.Fatalf("load report interval %d ms, want 500", got)
	}
	if len(p.GetAdapters()) != 1 {
		t.Fatalf("adapters %v, want one", p.GetAdapters())
	}
	a := p.GetAdapters()[0]
	if a.GetName() != "p" || a.GetType() != "vllm" || a.GetCapacity() != 3 || a.GetLongCapacity() != 1 || a.GetBaseUrl() != "http://127.0.0.1:9/v1" {
		t.Fatalf("adapter %v", a)
	}
	if !maps.Equal(a.GetHeaders(), map[string]string{"X-A": "1"}) || a.GetSettings()["kill_grace_ms"] == "" {
		t.Fatalf("adapter headers %v, settings %v", a.GetHeaders(), a.GetSettings())
	}
}
