package nodeagent

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A tunnel's frames carry the run id and sequence numbers 1, 2, 3, … in
// order: STATUS first, body frames in upstream order, END last.
func TestTunnelFrameSequence(t *testing.T) {
	events := []string{"data: {\"a\":1}\n\n", "data: {\"a\":2}\n\n", "data: {\"a\":3}\n\n", "data: [DONE]\n\n"}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, ev := range events {
			_, _ = w.Write([]byte(ev))
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	c := startOpenAICompatNode(t, up.URL+"/v1")
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: &iop.ProviderTunnelRequest{
		RunId: "t-seq", Adapter: "oa", Target: "m", Method: "POST", Path: "/chat/completions", Stream: true,
		Body: []byte(`{"model":"m","stream":true,"messages":[]}`),
	}}})
	if len(envs) < 3 {
		t.Fatalf("%d frames", len(envs))
	}
	var body strings.Builder
	for i, env := range envs {
		f := env.GetProviderTunnelFrame()
		if f == nil {
			t.Fatalf("frame %d is %T", i, env.Body)
		}
		wantRun := "t-seq" // on every frame but BODY frames
		if f.GetKind() == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY {
			wantRun = ""
		}
		if f.GetSequence() != uint64(i+1) || f.GetRunId() != wantRun {
			t.Fatalf("frame %d (%v): sequence %d run %q, want %d %q", i, f.GetKind(), f.GetSequence(), f.GetRunId(), i+1, wantRun)
		}
		if f.GetKind() == iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY {
			body.Write(f.GetBody())
		}
	}
	if k := envs[0].GetProviderTunnelFrame().GetKind(); k != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS {
		t.Fatalf("first frame %v, want STATUS", k)
	}
	if k := envs[len(envs)-1].GetProviderTunnelFrame().GetKind(); k != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END {
		t.Fatalf("last frame %v, want END", k)
	}
	if body.String() != strings.Join(events, "") {
		t.Fatalf("body %q", body.String())
	}
}

// An AdapterConfig without a name is the legacy single instance of its
// type: it is addressed by the type name.
func TestEmptyAdapterNameIsTheTypeName(t *testing.T) {
	payload := &iop.NodeConfigPayload{
		Adapters:  []*iop.AdapterConfig{{Type: "mock", Category: "api", Capacity: 2}},
		Heartbeat: &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 2000},
	}
	fe := startFakeEdge(t, payload, nil)
	c := startNode(t, fe, fullAgent(t))
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r-legacy", Adapter: "mock", Target: "x", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("legacy name"),
	}}})
	if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
		t.Fatalf("run on the unnamed mock: %v", ev)
	}
	snaps := c2snapshots(t, c)
	if len(snaps) != 1 || snaps[0] != "mock" {
		t.Fatalf("providers command lists %v, want the unnamed instance as provider_id mock", snaps)
	}
}

// c2snapshots returns the provider ids of the node's providers command.
func c2snapshots(t *testing.T, c *nodewire.Conn) []string {
	t.Helper()
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_NodeCommandRequest{NodeCommandRequest: &iop.NodeCommandRequest{Type: "providers"}}})
	if len(envs) != 1 {
		t.Fatalf("providers: %d answers", len(envs))
	}
	resp := envs[0].GetNodeCommandResponse()
	var ids []string
	for _, p := range resp.GetProviders() {
		ids = append(ids, p.GetProviderId())
	}
	return ids
}
