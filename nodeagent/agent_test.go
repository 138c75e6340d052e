package nodeagent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	"github.com/iop-gateway/iop/nodeagent/openaicompat"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// startNode runs a supervisor for agent against fe until the test ends and
// returns the edge-side ready connection.
func startNode(t *testing.T, fe *fakeEdge, agent *Agent) *nodewire.Conn {
	t.Helper()
	sup := NewSupervisor(SupervisorConfig{
		Dial:   nodewire.DialConfig{Address: fe.addr, HandshakeTimeout: 5 * time.Second},
		NodeID: "n1", Token: "tok", Interval: 20 * time.Millisecond,
	}, agent, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sup.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return fe.nextReady(t)
}

// startOpenAICompatNode runs a node whose one adapter, "oa", is an
// openai_compat instance of capacity 1 on baseURL, and returns the
// edge-side ready connection.
func startOpenAICompatNode(t *testing.T, baseURL string) *nodewire.Conn {
	t.Helper()
	payload := &iop.NodeConfigPayload{
		Adapters: []*iop.AdapterConfig{{Name: "oa", Type: "openai_compat", Category: "api", Capacity: 1, BaseUrl: baseURL}},
		// A generous timeout: under -race on a loaded 2-core machine a large
		// answer has kept both ends of the session from their heartbeats for
		// over 2 s, losing the session.
		Heartbeat: &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 30000},
	}
	return startNode(t, startFakeEdge(t, payload, nil), fullAgent(t))
}

func fullAgent(t *testing.T) *Agent {
	a := NewAgent(map[string]adapter.Factory{"mock": mock.New, "openai_compat": openaicompat.New},
		adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	return a
}

func chatInput(text string) *iop.RunInput {
	return &iop.RunInput{Messages: []*iop.ChatMessage{{Role: iop.ChatRole_CHAT_ROLE_USER, Content: []*iop.ContentPart{{Part: &iop.ContentPart_Text{Text: text}}}}}}
}

func terminal(envs []*iop.Envelope) *iop.RunEvent {
	if len(envs) == 0 {
		return nil
	}
	return envs[len(envs)-1].GetRunEvent()
}

func TestRunStreamsStartDeltasComplete(t *testing.T) {
	fe := startFakeEdge(t, mockPayload(4), nil)
	c := startNode(t, fe, fullAgent(t))
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r1", Adapter: "m", Target: "x", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("one two three"),
	}}})
	if len(envs) != 5 {
		t.Fatalf("got %d events, want start + 3 deltas + complete", len(envs))
	}
	for i, env := range envs {
		ev := env.GetRunEvent()
		if ev.GetSequence() != uint64(i+1) || ev.GetRunId() != "r1" {
			t.Fatalf("event %d: seq %d run %q", i, ev.GetSequence(), ev.GetRunId())
		}
	}
	if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE || ev.GetUsage().GetCompletionTokens() != 3 {
		t.Fatalf("terminal = %v", ev)
	}
}

func TestUnknownAdapterIsAnErrorEvent(t *testing.T) {
	fe := startFakeEdge(t, mockPayload(4), nil)
	c := startNode(t, fe, fullAgent(t))
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{RunId: "r", Adapter: "nope"}}})
	if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_ERROR || ev.GetError().GetCode() != adapter.CodeUnsupported {
		t.Fatalf("terminal = %v", ev)
	}
}

// The capacity gate is one per instance, shared by tunnel and run: while a
// tunnel holds the only slot, a run on the same instance fails at once.
func TestCapacityGateSharedByTunnelAndRun(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","choices":[]}`))
	}))
	defer up.Close()
	defer close(release)
	c := startOpenAICompatNode(t, up.URL+"/v1")

	tunnelDone := make(chan []*iop.Envelope, 1)
	go func() {
		tunnelDone <- exchange(t, c, &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: &iop.ProviderTunnelRequest{
			RunId: "t1", Adapter: "oa", Target: "m", Method: "POST", Path: "/chat/completions", Body: []byte(`{"model":"m","messages":[]}`),
		}}})
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("tunnel never reached the upstream")
	}
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r1", Adapter: "oa", Target: "m", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("hi"),
	}}})
	if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_ERROR || ev.GetError().GetCode() != adapter.CodeCapacityExceeded {
		t.Fatalf("run while tunnel holds the slot: %v, want capacity_exceeded", ev)
	}
	release <- struct{}{}
	tenvs := <-tunnelDone
	last := tenvs[len(tenvs)-1].GetProviderTunnelFrame()
	if last.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END {
		t.Fatalf("tunnel ended with %v", last)
	}
}

// CANCEL_RUN on the run's own stream cancels the adapter's context and the
// run ends with exactly one CANCELLED terminal event.
func TestCancelRunOnStream(t *testing.T) {
	payload := &iop.NodeConfigPayload{
		Adapters:  []*iop.AdapterConfig{{Name: "slow", Type: "mock", Capacity: 2, Settings: map[string]string{"delay_ms": "200"}}},
		Heartbeat: &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 2000},
	}
	fe := startFakeEdge(t, payload, nil)
	c := startNode(t, fe, fullAgent(t))
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r1", Adapter: "slow", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Stream: true, Input: chatInput("a b c d e f g h i j"),
	}}})
	_ = st.SetReadDeadline(time.Now().Add(10 * time.Second))
	var types []iop.RunEventType
	for {
		env, err := st.Recv()
		if err != nil {
			break
		}
		ev := env.GetRunEvent()
		types = append(types, ev.GetType())
		if ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_DELTA && len(types) == 2 {
			_ = st.Send(&iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: "r1"}}})
		}
	}
	_ = st.CloseWrite()
	terminals := 0
	for _, ty := range types {
		if ty >= iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
			terminals++
		}
	}
	if types[len(types)-1] != iop.RunEventType_RUN_EVENT_TYPE_CANCELLED || terminals != 1 {
		t.Fatalf("events %v: want exactly one terminal, CANCELLED", types)
	}
}

func refresh(t *testing.T, c *nodewire.Conn, p *iop.NodeConfigPayload) *iop.NodeConfigRefreshResponse {
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_NodeConfigRefreshRequest{NodeConfigRefreshRequest: &iop.NodeConfigRefreshRequest{Config: p}}})
	if len(envs) != 1 {
		t.Fatalf("refresh: %d answers", len(envs))
	}
	return envs[0].GetNodeConfigRefreshResponse()
}

func command(t *testing.T, c *nodewire.Conn, typ string) map[string]any {
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_NodeCommandRequest{NodeCommandRequest: &iop.NodeCommandRequest{Type: typ}}})
	if len(envs) != 1 {
		t.Fatalf("command: %d answers", len(envs))
	}
	resp := envs[0].GetNodeCommandResponse()
	if resp.GetError() != "" {
		t.Fatalf("command %s: %s", typ, resp.GetError())
	}
	var out map[string]any
	if err := json.Unmarshal(resp.GetPayloadJson(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRefreshAppliedRestartRequiredFailed(t *testing.T) {
	fe := startFakeEdge(t, mockPayload(2), nil)
	agent := fullAgent(t)
	c := startNode(t, fe, agent)

	// Applied: a capacity change is hot.
	if r := refresh(t, c, mockPayload(5)); r.GetStatus() != iop.RefreshStatus_REFRESH_STATUS_APPLIED {
		t.Fatalf("capacity change: %v", r)
	}
	snaps := agent.Snapshots(context.Background())
	if len(snaps) != 1 || snaps[0].GetCapacity() != 5 {
		t.Fatalf("after refresh: %v", snaps)
	}
	// Restart required: a type change; nothing changes.
	p := mockPayload(5)
	p.Adapters[0].Type, p.Adapters[0].BaseUrl = "openai_compat", "http://127.0.0.1:1/v1"
	if r := refresh(t, c, p); r.GetStatus() != iop.RefreshStatus_REFRESH_STATUS_RESTART_REQUIRED {
		t.Fatalf("type change: %v", r)
	}
	// Failed: invalid settings; the old config keeps serving.
	bad := mockPayload(7)
	bad.Adapters[0].Settings = map[string]string{"delay_ms": "-5"}
	if r := refresh(t, c, bad); r.GetStatus() != iop.RefreshStatus_REFRESH_STATUS_FAILED || r.GetReason() == "" {
		t.Fatalf("invalid config: %v", r)
	}
	if snaps := agent.Snapshots(context.Background()); snaps[0].GetCapacity() != 5 || snaps[0].GetType() != "mock" {
		t.Fatalf("failed refresh changed the config: %v", snaps)
	}
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{RunId: "r", Adapter: "m", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("still here")}}})
	if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
		t.Fatalf("old config stopped serving: %v", ev)
	}
	// Unsupported type: failed.
	unk := mockPayload(1)
	unk.Adapters = append(unk.Adapters, &iop.AdapterConfig{Name: "z", Type: "quantum"})
	if r := refresh(t, c, unk); r.GetStatus() != iop.RefreshStatus_REFRESH_STATUS_FAILED {
		t.Fatalf("unknown type: %v", r)
	}
}

func TestCommands(t *testing.T) {
	fe := startFakeEdge(t, mockPayload(3), nil)
	c := startNode(t, fe, fullAgent(t))
	exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{RunId: "r", Adapter: "m", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("a b")}}})
	usage := command(t, c, CmdUsage)["adapters"].([]any)[0].(map[string]any)
	if usage["requests"].(float64) != 1 || usage["completion_tokens"].(float64) != 2 {
		t.Fatalf("usage = %v", usage)
	}
	caps := command(t, c, CmdCapabilities)
	if len(caps["adapter_types"].([]any)) != 2 {
		t.Fatalf("capabilities = %v", caps)
	}
	if tr := command(t, c, CmdTransport); tr["connected"] != true {
		t.Fatalf("transport = %v", tr)
	}
	if p := command(t, c, CmdProviders)["providers"].([]any); len(p) != 1 {
		t.Fatalf("providers = %v", p)
	}
	if s := command(t, c, CmdSessions); s["sessions"] == nil {
		t.Fatalf("sessions = %v", s)
	}
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_NodeCommandRequest{NodeCommandRequest: &iop.NodeCommandRequest{Type: "rm -rf"}}})
	if envs[0].GetNodeCommandResponse().GetError() == "" {
		t.Fatal("unknown command accepted")
	}
}
