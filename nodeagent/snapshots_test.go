package nodeagent

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// offlineInstance is a mock instance whose backend reports itself down.
type offlineInstance struct{ adapter.Instance }

func (offlineInstance) Health(context.Context) adapter.Health {
	return adapter.Health{Status: adapter.HealthOffline, Running: 2, Waiting: 3, KVCacheUsage: 0.5}
}

// A provider's snapshot carries its configuration (long capacity) and its
// backend's health: a backend down reads as unavailable, with its figures.
func TestSnapshotOfflineBackendIsUnavailable(t *testing.T) {
	a := NewAgent(map[string]adapter.Factory{"mock": func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
		in, err := mock.New(cfg, env)
		return offlineInstance{in}, err
	}}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	p := mockPayload(4)
	p.Adapters[0].LongCapacity = 2
	if _, err := a.Apply(p, true); err != nil {
		t.Fatal(err)
	}
	s := a.Snapshots(context.Background())[0]
	if s.GetStatus() != "unavailable" || s.GetHealth() != adapter.HealthOffline || s.GetCapacity() != 4 || s.GetLongCapacity() != 2 ||
		s.GetBackendRunning() != 2 || s.GetBackendWaiting() != 3 || s.GetKvCacheUsage() != 0.5 {
		t.Fatalf("snapshot %v: want unavailable, offline, capacity 4, long capacity 2, the backend's figures", s)
	}
	r := a.loadReport(context.Background())
	if len(r.GetProviders()) != 1 || r.GetProviders()[0].GetKvCacheUsage() != 0.5 || r.GetProviders()[0].GetHealth() != adapter.HealthOffline {
		t.Fatalf("load report %v: want the backend's health and figures", r)
	}
}

// The usage command counts the requests refused at the capacity gate.
func TestUsageCountsRejectedOverCapacity(t *testing.T) {
	b := &holdBackend{entered: make(chan string, 4), release: make(chan struct{})}
	a := NewAgent(map[string]adapter.Factory{"mock": mock.New, "hold": b.factory}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	c := startNode(t, startFakeEdge(t, holdPayload(true), nil), a)
	held := make(chan []*iop.Envelope, 1)
	// Owner: the test; ends once b.release is closed below.
	go func() {
		held <- exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{RunId: "r1", Adapter: "h", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("a")}}})
	}()
	select {
	case <-b.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the first run never reached its adapter")
	}
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{RunId: "r2", Adapter: "h", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("b")}}})
	if ev := terminal(envs); ev.GetError().GetCode() != adapter.CodeCapacityExceeded {
		t.Fatalf("second run: %v, want capacity_exceeded", ev)
	}
	close(b.release)
	<-held
	for _, u := range commandPayload(t, a, CmdUsage)["adapters"].([]any) {
		if u := u.(map[string]any); u["adapter"] == "h" && (u["rejected_over_capacity"] != 1.0 || u["requests"] != 1.0) {
			t.Fatalf("usage %v: want 1 request, 1 rejected over capacity", u)
		}
	}
}
