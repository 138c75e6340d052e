package stack

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The edge routes by what a node's adapters declare, never by a provider's
// type name: a "vllm" provider whose adapter declares no tunnel gets
// normalized runs, and a "mock" provider whose adapter declares the tunnel
// gets the raw request.
func TestRoutesByDeclaredCapability(t *testing.T) {
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "tok-a", Providers: []config.ProviderSpec{
			{Name: "v", Type: "vllm", BaseURL: "http://127.0.0.1:1/v1", Capacity: 1},
			{Name: "m", Type: "mock", Capacity: 1},
		}}},
		Models: []config.ModelSpec{
			{Name: "on-v", Providers: []config.ModelProvider{{Node: "a", Provider: "v", Target: "tv"}}},
			{Name: "on-m", Providers: []config.ModelProvider{{Node: "a", Provider: "m", Target: "tm"}}},
		},
	}
	e := StartEdge(t, cfg, EdgeOptions{})
	fn := startFakeNodeWith(t, e.NodeAddr, "a", "tok-a", []*iop.AdapterCapabilities{
		{Adapter: "v", RunOperations: []iop.RunOperation{iop.RunOperation_RUN_OPERATION_CHAT}},
		{Adapter: "m", Tunnel: true},
	})
	e.WaitReady(t, "a", 10*time.Second)
	for _, tc := range []struct {
		model  string
		tunnel bool
	}{{"on-v", false}, {"on-m", true}} {
		done := make(chan struct{})
		// Owner: the test; ends when the fake node stops answering (cleanup).
		go func() {
			defer close(done)
			resp, err := http.Post(e.URL+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"`+tc.model+`","messages":[{"role":"user","content":"hi"}]}`))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
		ns := fn.next(t)
		switch {
		case tc.tunnel && ns.first.GetProviderTunnelRequest() == nil:
			t.Errorf("%s: got %T, want a tunnel request (its adapter declared the tunnel)", tc.model, ns.first.Body)
		case !tc.tunnel && ns.first.GetRunRequest() == nil:
			t.Errorf("%s: got %T, want a normalized run (its adapter declared no tunnel)", tc.model, ns.first.Body)
		}
		// End the exchange so the client is answered.
		if r := ns.first.GetRunRequest(); r != nil {
			_ = ns.st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{RunId: r.GetRunId(), Sequence: 1,
				Type: iop.RunEventType_RUN_EVENT_TYPE_ERROR, Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "test"}}}})
		} else {
			_ = ns.st.Send(&iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: &iop.ProviderTunnelFrame{
				RunId: ns.first.GetProviderTunnelRequest().GetRunId(), Sequence: 1, Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR,
				Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "test"}}}})
		}
		_ = ns.st.CloseWrite()
		closeOnce(ns.done)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the client was never answered", tc.model)
		}
	}
	// And a request only the tunnel can serve is refused for the model
	// whose only candidate declared none, whatever its type says.
	resp, err := http.Post(e.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"on-v","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("/v1/responses on a run-only candidate: %d, want 400", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
}

// A real node declares its adapters' capabilities with its ready request.
func TestNodeDeclaresCapabilities(t *testing.T) {
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "tok-a", Providers: []config.ProviderSpec{
			{Name: "v", Type: "vllm", BaseURL: "http://127.0.0.1:1/v1", Capacity: 1},
			{Name: "m", Type: "mock", Capacity: 1},
		}}},
		Models: []config.ModelSpec{{Name: "x", Providers: []config.ModelProvider{{Node: "a", Provider: "m", Target: "t"}}}},
	}
	e := StartEdge(t, cfg, EdgeOptions{})
	StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "tok-a"})
	e.WaitReady(t, "a", 10*time.Second)
	caps := e.Dispatcher.Capabilities("a")
	if v := caps["v"]; v == nil || !v.GetTunnel() || v.GetHealthSource() == "" {
		t.Fatalf("vllm adapter declared %v", v)
	}
	if m := caps["m"]; m == nil || m.GetTunnel() || len(m.GetRunOperations()) != 3 {
		t.Fatalf("mock adapter declared %v", m)
	}
}
