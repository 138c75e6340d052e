package nodeagent

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// panicky is an adapter with a bug: every call panics.
type panicky struct{ adapter.Instance }

func (panicky) Run(context.Context, *iop.RunRequest, adapter.RunSink) (*adapter.Result, error) {
	var s *iop.Sampling
	_ = *s.Temperature // the bug class seen: a missing optional message
	return nil, nil
}

func (panicky) Tunnel(context.Context, *iop.ProviderTunnelRequest, adapter.TunnelSink) error {
	panic("tunnel bug")
}

// buggyAgent is an agent with a mock provider "m" and a provider "b" whose
// mock instance wrap turns buggy, and the payload configuring both.
func buggyAgent(t *testing.T, wrap func(adapter.Instance) adapter.Instance) (*Agent, *iop.NodeConfigPayload) {
	a := NewAgent(map[string]adapter.Factory{
		"mock": mock.New,
		"buggy": func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
			c := proto.Clone(cfg).(*iop.AdapterConfig)
			c.Type = "mock"
			in, err := mock.New(c, env)
			return wrap(in), err
		},
	}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	payload := mockPayload(1)
	payload.Adapters = append(payload.Adapters, &iop.AdapterConfig{Name: "b", Type: "buggy", Category: "api", Capacity: 1})
	return a, payload
}

// An adapter that panics fails its own exchange with an internal error;
// the node, its other adapters and its slot survive it.
func TestAdapterPanicFailsOnlyItsExchange(t *testing.T) {
	a, payload := buggyAgent(t, func(in adapter.Instance) adapter.Instance { return panicky{in} })
	c := startNode(t, startFakeEdge(t, payload, nil), a)

	for i := 0; i < 2; i++ { // the second finds the slot free again
		envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
			RunId: "r", Adapter: "b", Target: "x", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("hi"),
		}}})
		if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_ERROR || ev.GetError().GetCode() != adapter.CodeInternal {
			t.Fatalf("run %d: terminal = %v, want an internal error", i, ev)
		}
	}
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: &iop.ProviderTunnelRequest{
		RunId: "t", Adapter: "b", Target: "x", Method: "POST", Path: "/chat/completions", Body: []byte(`{}`),
	}}})
	if f := envs[len(envs)-1].GetProviderTunnelFrame(); f.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR || f.GetError().GetCode() != adapter.CodeInternal {
		t.Fatalf("tunnel: last frame = %v, want an internal error", f)
	}
	envs = exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "ok", Adapter: "m", Target: "x", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("still here"),
	}}})
	if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
		t.Fatalf("a healthy adapter after the panics: terminal = %v", ev)
	}
}

// panickyQueries is an adapter whose queries panic (a backend's answer
// parsed by buggy code).
type panickyQueries struct{ adapter.Instance }

func (panickyQueries) Models(context.Context) ([]string, error) { panic("models bug") }
func (panickyQueries) Health(context.Context) adapter.Health    { panic("health bug") }
func (panickyQueries) Sessions() []adapter.SessionInfo          { panic("sessions bug") }
func (panickyQueries) TerminateSession(string) error            { panic("terminate bug") }

// An adapter whose queries panic fails its own part of each answer; the
// node survives, and the other adapters still answer.
func TestAdapterQueryPanicFailsOnlyItsAnswer(t *testing.T) {
	a, payload := buggyAgent(t, func(in adapter.Instance) adapter.Instance { return panickyQueries{in} })
	if _, err := a.Apply(payload, true); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, typ := range []string{CmdCapabilities, CmdSessions, CmdProviders} {
		resp := a.Command(ctx, typ)
		if resp.GetError() != "" || !strings.Contains(string(resp.GetPayloadJson()), `"m"`) && typ != CmdSessions {
			t.Fatalf("%s: error %q, payload %s", typ, resp.GetError(), resp.GetPayloadJson())
		}
	}
	caps := string(a.Command(ctx, CmdCapabilities).GetPayloadJson())
	if !strings.Contains(caps, `"adapter":"b"`) || !strings.Contains(caps, `"error":"failed"`) {
		t.Fatalf("capabilities: %s, want adapter b with error failed", caps)
	}
	for _, p := range a.Command(ctx, CmdProviders).GetProviders() {
		if p.GetProviderId() == "b" && p.GetHealth() != adapter.HealthOK {
			t.Fatalf("providers: b health %v, want ok (a panic makes no claim)", p.GetHealth())
		}
	}
	if r := a.loadReport(ctx); len(r.GetProviders()) != 2 {
		t.Fatalf("load report: %v, want both providers", r)
	}
	a.serveCancel(&iop.CancelRequest{Kind: iop.CancelKind_CANCEL_KIND_TERMINATE_SESSION, SessionId: "s"})
}
