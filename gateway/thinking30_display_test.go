package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// thinking.display "omitted" keeps the thinking block and empties its text,
// as Anthropic's API answers: through the tunnel, streamed to the client or
// not, whether vLLM streams the reasoning or answers one chat.completion,
// the official SDK reads a thinking block with empty thinking before the
// text; "summarized" (the default) shows the reasoning. The stream carries
// no thinking_delta and none of the reasoning's bytes.
func TestMessagesThinkingDisplayOmitted(t *testing.T) {
	const reasoning = "Secret plan: add the numbers."
	whole := func(w http.ResponseWriter) {
		writeJSON(w, http.StatusOK, `{"id":"chatcmpl-1","object":"chat.completion","created":1727000000,"model":"m",`+
			`"choices":[{"index":0,"message":{"role":"assistant","reasoning":"`+reasoning+`","content":"Hi"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)
	}
	// "streamed" streams when asked to; "whole" answers one
	// chat.completion either way (vLLM ignoring "stream": true).
	answers := map[string]func(w http.ResponseWriter, stream bool){
		"streamed": func(w http.ResponseWriter, stream bool) {
			if !stream {
				whole(w)
				return
			}
			writeSSE(w, chunk(`{"role":"assistant","content":""}`, "null"), chunk(`{"reasoning_content":"Secret plan: "}`, "null"),
				chunk(`{"reasoning_content":"add the numbers."}`, "null"),
				chunk(`{"content":"Hi"}`, "null"), chunk(`{"content":""}`, `"stop"`), usageChunk(12, 3), sseDone)
		},
		"whole": func(w http.ResponseWriter, _ bool) { whole(w) },
	}
	for name, answer := range answers {
		u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				Stream bool `json:"stream"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			answer(w, req.Stream)
		})
		s := tunnelStack(t, u)
		cl := anClient(t, s.Edge, "")
		for _, c := range []struct {
			name     string
			thinking anthropic.ThinkingConfigParamUnion
			want     string
		}{
			{"enabled omitted", anthropic.ThinkingConfigParamUnion{OfEnabled: &anthropic.ThinkingConfigEnabledParam{
				BudgetTokens: 1024, Display: anthropic.ThinkingConfigEnabledDisplayOmitted}}, "thinking:|text:Hi"},
			{"adaptive omitted", anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{
				Display: anthropic.ThinkingConfigAdaptiveDisplayOmitted}}, "thinking:|text:Hi"},
			{"adaptive summarized", anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{
				Display: anthropic.ThinkingConfigAdaptiveDisplaySummarized}}, "thinking:" + reasoning + "|text:Hi"},
		} {
			p := anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 2048, Messages: []anthropic.MessageParam{userText("Hi")}, Thinking: c.thinking}
			streamed := accumulate(t, cl.Messages.NewStreaming(ctxT(t), p))
			whole, err := cl.Messages.New(ctxT(t), p)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, c.name, err)
			}
			for form, m := range map[string]*anthropic.Message{"stream": &streamed, "message": whole} {
				var got []string
				for _, b := range m.Content {
					got = append(got, b.Type+":"+b.Text+b.Thinking)
				}
				if strings.Join(got, "|") != c.want || m.StopReason != anthropic.StopReasonEndTurn {
					t.Errorf("%s, %s, %s: blocks %q (stop %q), want %q", name, c.name, form, got, m.StopReason, c.want)
				}
			}
		}
		// The raw stream: the block's start, its signature and its stop;
		// no thinking_delta, and nothing of the reasoning anywhere.
		r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":2048,"stream":true,`+
			`"thinking":{"type":"adaptive","display":"omitted"},"messages":[{"role":"user","content":"Hi"}]}`)
		body := string(r.Body)
		if r.Status != http.StatusOK || strings.Contains(body, "thinking_delta") || strings.Contains(body, "Secret") ||
			!strings.Contains(body, `"content_block":{"type":"thinking","thinking":"","signature":""}`) ||
			!strings.Contains(body, `"signature_delta"`) || !strings.Contains(body, "event: message_stop") {
			t.Errorf("%s: raw stream %d %s", name, r.Status, body)
		}
	}
}

// A display Anthropic's API does not know is refused before the request
// reaches a provider: 400 invalid_request_error in Anthropic's envelope,
// naming thinking.display, on /v1/messages (streamed or not) and
// count_tokens.
func TestMessagesUnknownThinkingDisplayRefused(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	s := tunnelStack(t, u)
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		for _, thinking := range []string{`{"type":"adaptive","display":"full"}`, `{"type":"enabled","budget_tokens":1024,"display":"Omitted"}`,
			`{"type":"adaptive","display":1}`} {
			for _, stream := range []string{"false", "true"} {
				r := post(t, s.Edge, path, `{"model":"qwen-7b","max_tokens":2048,"stream":`+stream+`,"thinking":`+thinking+
					`,"messages":[{"role":"user","content":"x"}]}`)
				if msg := anthropicErrorMessage(t, r); r.Status != http.StatusBadRequest || !strings.HasPrefix(msg, "thinking.display: ") {
					t.Errorf("%s %s stream %s: %d %s", path, thinking, stream, r.Status, r.Body)
				}
			}
		}
	}
	if n := len(u.requests()); n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
}

// budget_tokens is read for its type only: a budget missing, under 1024,
// or at or over max_tokens (with or without the interleaved-thinking beta)
// is accepted, streamed or not and on count_tokens, as no upstream here
// has a thinking budget and Claude Code sends budgets at or over
// max_tokens (its beta depends on the model name it is given). A budget
// that is no integer, and a thinking object without a type, are 400s with
// Anthropic's wording that reach no provider.
func TestMessagesThinkingBudgetReadForItsTypeOnly(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	s := tunnelStack(t, u)
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	for _, c := range []struct{ thinking, want string }{
		{`{"type":"enabled","budget_tokens":1500.5}`, "thinking.budget_tokens: expected an integer"},
		{`{"type":"adaptive","budget_tokens":"1024"}`, "thinking.budget_tokens: expected an integer"},
		{`{"budget_tokens":1024}`, "thinking.type: Field required"},
		{`{}`, "thinking.type: Field required"},
	} {
		for _, stream := range []string{"false", "true"} {
			r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":2048,"stream":`+stream+`,"thinking":`+c.thinking+`,`+msgs+`}`)
			if msg := anthropicErrorMessage(t, r); r.Status != http.StatusBadRequest || msg != c.want {
				t.Errorf("%s, stream %s: %d %q, want 400 %q", c.thinking, stream, r.Status, msg, c.want)
			}
		}
		r := post(t, s.Edge, "/v1/messages/count_tokens", `{"model":"qwen-7b","thinking":`+c.thinking+`,`+msgs+`}`)
		if msg := anthropicErrorMessage(t, r); r.Status != http.StatusBadRequest || msg != c.want {
			t.Errorf("count_tokens, %s: %d %q, want 400 %q", c.thinking, r.Status, msg, c.want)
		}
	}
	if n := len(u.requests()); n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
	cl := anClient(t, s.Edge, "")
	for _, c := range []struct {
		maxTokens int64
		thinking  anthropic.ThinkingConfigParamUnion
		opts      []option.RequestOption
	}{
		{2048, anthropic.ThinkingConfigParamOfEnabled(1024), nil},
		{2048, anthropic.ThinkingConfigParamOfEnabled(0), nil},
		{2048, anthropic.ThinkingConfigParamOfEnabled(1023), nil},
		{1024, anthropic.ThinkingConfigParamOfEnabled(1024), nil},
		{2048, anthropic.ThinkingConfigParamOfEnabled(31999), nil},
		{8, anthropic.ThinkingConfigParamOfEnabled(31999), []option.RequestOption{
			option.WithHeader("anthropic-beta", "claude-code-20250219, interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14")}},
	} {
		p := anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: c.maxTokens, Messages: []anthropic.MessageParam{userText("x")}, Thinking: c.thinking}
		if _, err := cl.Messages.New(ctxT(t), p, c.opts...); err != nil {
			t.Errorf("max_tokens %d, budget %d: %v", c.maxTokens, *c.thinking.GetBudgetTokens(), err)
		}
	}
	for _, thinking := range []string{`{"type":"enabled"}`, `{"type":"adaptive","budget_tokens":10}`, `{"type":"disabled","budget_tokens":99999}`} {
		if r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":8,"thinking":`+thinking+`,`+msgs+`}`); r.Status != http.StatusOK {
			t.Errorf("%s: %d %s", thinking, r.Status, r.Body)
		}
	}
	for _, body := range []string{
		`{"model":"qwen-7b","thinking":{"type":"enabled","budget_tokens":1000},` + msgs + `}`,
		`{"model":"qwen-7b","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":4096},` + msgs + `}`,
	} {
		if r := post(t, s.Edge, "/v1/messages/count_tokens", body); r.Status != http.StatusOK {
			t.Errorf("count_tokens %s: %d %s", body, r.Status, r.Body)
		}
	}
}

// anthropicErrorMessage checks r is an Anthropic error envelope with type
// invalid_request_error and returns its message ("" if it is not one).
func anthropicErrorMessage(t *testing.T, r response) string {
	t.Helper()
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(r.Body, &env) != nil || env.Type != "error" || env.Error.Type != "invalid_request_error" ||
		!strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") || r.Header.Get("request-id") == "" {
		return ""
	}
	return env.Error.Message
}
