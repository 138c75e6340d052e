package healthname_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/internal/healthname"
	"github.com/iop-gateway/iop/nodeagent"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// fixedHealth is an adapter that reports one health state: the providers
// command renders what it reports.
type fixedHealth struct{ state iop.HealthState }

func (f fixedHealth) Run(context.Context, *iop.RunRequest, adapter.RunSink) (*adapter.Result, error) {
	return nil, adapter.ErrUnsupported
}

func (f fixedHealth) Tunnel(context.Context, *iop.ProviderTunnelRequest, adapter.TunnelSink) error {
	return adapter.ErrUnsupported
}

func (f fixedHealth) Close() error { return nil }

func (f fixedHealth) Health(context.Context) adapter.Health { return adapter.Health{Status: f.state} }

// The node's providers command and the edge's /admin/status name each
// health state alike: for every value of the enum (from its descriptor),
// an adapter reporting it shows in the providers command's JSON under
// the name dispatch.HealthName gives the status API.
func TestProvidersCommandAndStatusAgree(t *testing.T) {
	values := iop.HealthState(0).Descriptor().Values()
	byName := map[string]iop.HealthState{}
	payload := &iop.NodeConfigPayload{}
	for i := 0; i < values.Len(); i++ {
		h := iop.HealthState(values.Get(i).Number())
		if h == iop.HealthState_HEALTH_STATE_DRAINING {
			continue // the agent's own state, not an adapter's: below
		}
		name := fmt.Sprintf("p%d", h)
		byName[name] = h
		payload.Adapters = append(payload.Adapters, &iop.AdapterConfig{Name: name, Type: "fixed", Capacity: 1})
	}
	factories := map[string]adapter.Factory{"fixed": func(cfg *iop.AdapterConfig, _ adapter.Env) (adapter.Instance, error) {
		return fixedHealth{state: byName[cfg.GetName()]}, nil
	}}
	agent := nodeagent.NewAgent(factories, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	defer agent.Close()
	if _, err := agent.Apply(payload, true); err != nil {
		t.Fatal(err)
	}
	check := func(want func(name string) iop.HealthState) {
		t.Helper()
		resp := agent.Command(context.Background(), nodeagent.CmdProviders)
		var got struct {
			Providers []struct {
				ProviderID string `json:"provider_id"`
				Health     string `json:"health"`
			} `json:"providers"`
		}
		if err := json.Unmarshal(resp.GetPayloadJson(), &got); err != nil || len(got.Providers) != len(byName) {
			t.Fatalf("providers answer %s (%v), want %d providers", resp.GetPayloadJson(), err, len(byName))
		}
		for _, p := range got.Providers {
			h := want(p.ProviderID)
			if status := dispatch.HealthName(h); p.Health != status || status != healthname.Of(h) {
				t.Errorf("%s (%s): providers command says %q, /admin/status %q", p.ProviderID, h, p.Health, status)
			}
		}
	}
	check(func(name string) iop.HealthState { return byName[name] })
	// Nothing is in flight: the drain returns at once, the agent left
	// draining, which every provider then shows.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := agent.Drain(ctx); err != nil || !agent.Draining() {
		t.Fatalf("Drain = %v, Draining = %v", err, agent.Draining())
	}
	check(func(string) iop.HealthState { return iop.HealthState_HEALTH_STATE_DRAINING })
}
