package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/gateway/anthropicapi"
)

// End to end through a real node: a model that thinks at length for a
// Messages client that did not enable thinking keeps the stream alive
// with pings while it thinks, and the client's SDK reads the answer.
func TestHiddenThinkingKeepsMessagesStreamAlive(t *testing.T) {
	thought := strings.Repeat("ponder ", 2000) // 14 KB of reasoning
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", map[string]any{"reasoning": thought})},
		modelOn("demo", "mock", "mock-echo"))
	e, _ := startStack(t, cfg)
	r := post(t, e, "/v1/messages", `{"model":"demo","max_tokens":4096,"stream":true,"messages":[{"role":"user","content":"hello world"}]}`)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	body := string(r.Body)
	if pings := strings.Count(body, "event: ping\n"); pings < len(thought)/anthropicapi.HiddenThinkingPingBytes {
		t.Errorf("%d pings for %d bytes of hidden reasoning", pings, len(thought))
	}
	if strings.Contains(body, "ponder") {
		t.Error("hidden reasoning reached the client")
	}

	an := anClient(t, e, "")
	m := accumulate(t, an.Messages.NewStreaming(ctxT(t), anthropic.MessageNewParams{Model: "demo", MaxTokens: 4096,
		Messages: []anthropic.MessageParam{userText("hello world")}}))
	if len(m.Content) != 1 || m.Content[0].Text != "hello world" || m.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("message %+v", m)
	}
}
