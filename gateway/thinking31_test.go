package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// thinking.display "updates" is a beta of Anthropic's API
// (thinking-display-updates-2026-08-18): without the beta it is refused
// as Anthropic refuses a display it does not know, 400 in Anthropic's
// envelope, on /v1/messages and count_tokens, before any provider; with
// it (the SDK's beta client sends the header) it reads as "omitted".
func TestMessagesDisplayUpdatesNeedsItsBeta(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"id":"chatcmpl-1","object":"chat.completion","created":1727000000,"model":"m",`+
			`"choices":[{"index":0,"message":{"role":"assistant","reasoning":"Secret plan.","content":"Hi"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)
	})
	s := tunnelStack(t, u)
	const want = `thinking.display: must be one of summarized, omitted ("updates" needs the anthropic-beta thinking-display-updates-2026-08-18)`
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		for _, beta := range []string{"", "interleaved-thinking-2025-05-14"} {
			hdr := map[string]string{"Content-Type": "application/json"}
			if beta != "" {
				hdr["anthropic-beta"] = beta
			}
			r := do(t, httpClient(t), http.MethodPost, s.URL+path, `{"model":"qwen-7b","max_tokens":64,`+
				`"thinking":{"type":"adaptive","display":"updates"},"messages":[{"role":"user","content":"x"}]}`, hdr)
			if msg := anthropicErrorMessage(t, r); r.Status != http.StatusBadRequest || msg != want {
				t.Errorf("%s, beta %q: %d %s", path, beta, r.Status, r.Body)
			}
		}
	}
	if n := len(u.requests()); n != 0 {
		t.Fatalf("the upstream got %d requests", n)
	}
	cl := anClient(t, s.Edge, "")
	thinking := anthropic.BetaThinkingConfigParamUnion{OfAdaptive: &anthropic.BetaThinkingConfigAdaptiveParam{
		Display: anthropic.BetaThinkingConfigAdaptiveDisplayUpdates}}
	msgs := []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Hi"))}
	betas := []anthropic.AnthropicBeta{anthropic.AnthropicBetaInterleavedThinking2025_05_14, anthropic.AnthropicBetaThinkingDisplayUpdates2026_08_18}
	m, err := cl.Beta.Messages.New(ctxT(t), anthropic.BetaMessageNewParams{Model: "qwen-7b", MaxTokens: 64, Messages: msgs,
		Thinking: thinking, Betas: betas})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Content) != 2 || m.Content[0].Type != "thinking" || m.Content[0].Thinking != "" || m.Content[1].Text != "Hi" {
		t.Errorf("with the beta: %s", m.RawJSON())
	}
	if _, err := cl.Beta.Messages.CountTokens(ctxT(t), anthropic.BetaMessageCountTokensParams{Model: "qwen-7b", Messages: msgs,
		Thinking: thinking, Betas: betas}); err != nil {
		t.Errorf("count_tokens with the beta: %v", err)
	}
}

// omittedLoop runs a tool loop through an Anthropic SDK with thinking
// display "omitted": the first answer (streamed, then whole) has a
// thinking block with empty text and signature and a get_weather call;
// the SDK sends that turn back as it came (Message.ToParam) with the
// tool's result, and the edge answers. It returns the answers' texts.
func omittedLoop(t *testing.T, cl anthropic.Client, model string) []string {
	t.Helper()
	tool := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}
	p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 2048, Tools: []anthropic.ToolUnionParam{tool},
		Thinking: anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{
			Display: anthropic.ThinkingConfigAdaptiveDisplayOmitted}},
		Messages: []anthropic.MessageParam{userText("Weather in Paris?")}}
	var texts []string
	for _, stream := range []bool{true, false} {
		first := sendMessage(t, cl, p, stream)
		c := first.Content
		if len(c) != 2 || c[0].Type != "thinking" || c[0].Thinking != "" || c[0].Signature != "" || c[1].Type != "tool_use" {
			t.Fatalf("stream %v: first answer %+v", stream, c)
		}
		back := p
		back.Messages = []anthropic.MessageParam{p.Messages[0], first.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(c[1].ID, "18C", false))}
		if raw, _ := json.Marshal(back.Messages[1]); !strings.Contains(string(raw), `{"signature":"","thinking":"","type":"thinking"}`) {
			t.Fatalf("the SDK sends the turn back as %s", raw)
		}
		m, err := cl.Messages.New(ctxT(t), back)
		if err != nil {
			t.Fatalf("stream %v: the turn sent back: %v", stream, err)
		}
		for _, b := range m.Content {
			if b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
	}
	return texts
}

// A conversation that sends the edge's own omitted thinking blocks back
// (empty thinking, empty signature, as Anthropic's SDKs resend them) is
// accepted, and the empty thinking reaches no backend: through the tunnel
// vLLM gets the assistant turn with its tool call and no reasoning.
func TestMessagesOmittedThinkingSentBackTunnel(t *testing.T) {
	const call = `{"id":"chatcmpl-tool-7f3a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		switch {
		case req.Messages[len(req.Messages)-1].Role == "tool":
			writeJSON(w, http.StatusOK, vllmChatJSON)
		case req.Stream:
			writeSSE(w, chunk(`{"role":"assistant","content":""}`, "null"), chunk(`{"reasoning_content":"Secret plan."}`, "null"),
				chunk(`{"tool_calls":[{"index":0,"id":"chatcmpl-tool-7f3a","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null"),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}`, "null"),
				chunk(`{"content":""}`, `"tool_calls"`), usageChunk(12, 9), sseDone)
		default:
			writeJSON(w, http.StatusOK, `{"id":"chatcmpl-1","object":"chat.completion","created":1727000000,"model":"m",`+
				`"choices":[{"index":0,"message":{"role":"assistant","reasoning":"Secret plan.","content":null,"tool_calls":[`+call+`]},`+
				`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}`)
		}
	})
	s := tunnelStack(t, u)
	if got := omittedLoop(t, anClient(t, s.Edge, ""), "qwen-7b"); len(got) != 2 || got[0] != "Hello! How can I help you today?" {
		t.Errorf("answers %q", got)
	}
	var backs int
	for _, r := range u.requests() {
		var body struct {
			Messages []map[string]json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Messages) < 3 {
			continue
		}
		backs++
		asst := body.Messages[1]
		if string(asst["role"]) != `"assistant"` || asst["tool_calls"] == nil || asst["reasoning"] != nil || asst["reasoning_content"] != nil {
			t.Errorf("vLLM got the assistant turn %s", r.Body)
		}
	}
	if backs != 2 {
		t.Errorf("vLLM got %d turns sent back, want 2", backs)
	}
}

// The same on a run, through a real node's ollama adapter: Ollama gets
// the assistant turn with its tool call and no thinking.
func TestMessagesOmittedThinkingSentBackRun(t *testing.T) {
	e, u := histOllamaStack(t)
	if got := omittedLoop(t, anClient(t, e, ""), "qwen"); len(got) != 2 || got[0] != "It is 18C." {
		t.Errorf("answers %q", got)
	}
	var backs int
	for _, body := range histOllamaBodies(u, "/api/chat") {
		msgs := histOllamaMessages(t, body)
		if len(msgs) < 3 {
			continue
		}
		backs++
		if msgs[1]["role"] != "assistant" || msgs[1]["tool_calls"] == nil || msgs[1]["thinking"] != nil {
			t.Errorf("Ollama got the assistant turn %v", msgs[1])
		}
	}
	if backs != 2 {
		t.Errorf("Ollama got %d turns sent back, want 2", backs)
	}
}
