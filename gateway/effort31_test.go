package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// effortCases are output_config.effort values and thinking settings with
// the reasoning_effort a backend gets ("" for none): Anthropic's "high"
// (its default) sends nothing, "max" sends OpenAI's top, "xhigh"; thinking
// off sends no effort (the edge turns thinking off its own way).
var effortCases = []struct {
	effort   anthropic.OutputConfigEffort
	thinking anthropic.ThinkingConfigParamUnion
	want     string
}{
	{anthropic.OutputConfigEffortLow, anthropic.ThinkingConfigParamUnion{}, `"low"`},
	{anthropic.OutputConfigEffortMedium, anthropic.ThinkingConfigParamOfEnabled(1024), `"medium"`},
	{anthropic.OutputConfigEffortHigh, anthropic.ThinkingConfigParamUnion{}, ``},
	{anthropic.OutputConfigEffortXhigh, anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}}, `"xhigh"`},
	{anthropic.OutputConfigEffortMax, anthropic.ThinkingConfigParamUnion{}, `"xhigh"`},
	{"", anthropic.ThinkingConfigParamUnion{}, ``},
}

// vllmHello answers as vLLM does: a stream of text when the request asks
// for one, else vllmChatJSON.
func vllmHello(text string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Stream {
			writeSSE(w, contentStream(text)...)
			return
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	}
}

// sendMessage sends p through cl, streamed (and accumulated) or not.
func sendMessage(t *testing.T, cl anthropic.Client, p anthropic.MessageNewParams, stream bool) anthropic.Message {
	t.Helper()
	if stream {
		return accumulate(t, cl.Messages.NewStreaming(ctxT(t), p))
	}
	m, err := cl.Messages.New(ctxT(t), p)
	if err != nil {
		t.Fatalf("%s: %v", p.Model, err)
	}
	return *m
}

// effortParams is a Messages request with effort and thinking set.
func effortParams(model string, effort anthropic.OutputConfigEffort, thinking anthropic.ThinkingConfigParamUnion) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 2048, Messages: []anthropic.MessageParam{userText("Hi")},
		Thinking: thinking, OutputConfig: anthropic.OutputConfigParam{Effort: effort}}
}

// Through the tunnel, the effort an Anthropic SDK sets reaches vLLM as
// reasoning_effort in the chat body, streamed or not; with thinking
// disabled vLLM gets chat_template_kwargs and no effort.
func TestMessagesEffortReachesTunnel(t *testing.T) {
	u := newUpstream(t, vllmHello("Hi"))
	s := tunnelStack(t, u)
	cl := anClient(t, s.Edge, "")
	lastBody := func() map[string]json.RawMessage {
		seen := u.requests()
		var m map[string]json.RawMessage
		if len(seen) == 0 || json.Unmarshal(seen[len(seen)-1].Body, &m) != nil {
			t.Fatalf("the upstream got %d requests", len(seen))
		}
		return m
	}
	for _, c := range effortCases {
		p := effortParams("qwen-7b", c.effort, c.thinking)
		if _, err := cl.Messages.New(ctxT(t), p); err != nil {
			t.Fatalf("effort %q: %v", c.effort, err)
		}
		if got := string(lastBody()["reasoning_effort"]); got != c.want {
			t.Errorf("effort %q: vLLM got reasoning_effort %q, want %q", c.effort, got, c.want)
		}
		accumulate(t, cl.Messages.NewStreaming(ctxT(t), p))
		if got := string(lastBody()["reasoning_effort"]); got != c.want {
			t.Errorf("effort %q, streamed: vLLM got reasoning_effort %q, want %q", c.effort, got, c.want)
		}
	}
	off := anthropic.NewThinkingConfigDisabledParam()
	if _, err := cl.Messages.New(ctxT(t), effortParams("qwen-7b", anthropic.OutputConfigEffortLow, anthropic.ThinkingConfigParamUnion{OfDisabled: &off})); err != nil {
		t.Fatal(err)
	}
	if b := lastBody(); b["reasoning_effort"] != nil || string(b["chat_template_kwargs"]) != `{"enable_thinking":false}` {
		t.Errorf("thinking off with effort low: vLLM got reasoning_effort %s, chat_template_kwargs %s", b["reasoning_effort"], b["chat_template_kwargs"])
	}
}

// On a run, the effort is the run's reasoning_effort extra member, as an
// OpenAI client's reasoning_effort is; with thinking disabled the run gets
// "none" whatever the effort.
func TestMessagesEffortInRunRequest(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	n := startFakeNode(t, e, thinkingOffNode)
	cl := anClient(t, e, "")
	off := anthropic.NewThinkingConfigDisabledParam()
	cases := append(effortCases[:len(effortCases):len(effortCases)], struct {
		effort   anthropic.OutputConfigEffort
		thinking anthropic.ThinkingConfigParamUnion
		want     string
	}{anthropic.OutputConfigEffortMax, anthropic.ThinkingConfigParamUnion{OfDisabled: &off}, `"none"`})
	for _, c := range cases {
		if _, err := cl.Messages.New(ctxT(t), effortParams("demo", c.effort, c.thinking)); err != nil {
			t.Fatalf("effort %q: %v", c.effort, err)
		}
		if got := string(thinkingOffExtra(t, n.nextRequest(t))["reasoning_effort"]); got != c.want {
			t.Errorf("effort %q: the run got reasoning_effort %q, want %q", c.effort, got, c.want)
		}
	}
}

// End to end with the ollama adapter: an effort is Ollama's think level,
// as an OpenAI client's reasoning_effort is: "max", sent as "xhigh", is
// Ollama's "max" again.
func TestMessagesEffortReachesOllama(t *testing.T) {
	e, u := histOllamaStack(t)
	an := anClient(t, e, "")
	for effort, want := range map[anthropic.OutputConfigEffort]string{
		anthropic.OutputConfigEffortLow: `"low"`, anthropic.OutputConfigEffortMax: `"max"`, anthropic.OutputConfigEffortHigh: ``,
	} {
		p := effortParams("qwen", effort, anthropic.ThinkingConfigParamUnion{})
		if _, err := an.Messages.New(ctxT(t), p); err != nil {
			t.Fatalf("effort %q: %v", effort, err)
		}
		bodies := histOllamaBodies(u, "/api/chat")
		if got := string(bodies[len(bodies)-1]["think"]); got != want {
			t.Errorf("effort %q: Ollama got think %q, want %q", effort, got, want)
		}
	}
}

// An effort Anthropic's API does not take, or not a string, or an
// output_config that is not an object, is a 400 invalid_request_error in
// Anthropic's envelope naming the field, on /v1/messages (streamed or not)
// and count_tokens, and reaches no provider.
func TestMessagesEffortRefused(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	s := tunnelStack(t, u)
	for _, c := range []struct{ config, want string }{
		{`{"effort":"none"}`, "output_config.effort: must be one of low, medium, high, xhigh, max"},
		{`{"effort":"High"}`, "output_config.effort: must be one of low, medium, high, xhigh, max"},
		{`{"effort":1}`, "output_config.effort: expected a string"},
		{`"low"`, "output_config: expected an object"},
	} {
		for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
			for _, stream := range []string{"false", "true"} {
				r := post(t, s.Edge, path, `{"model":"qwen-7b","max_tokens":64,"stream":`+stream+`,"output_config":`+c.config+
					`,"messages":[{"role":"user","content":"x"}]}`)
				if msg := anthropicErrorMessage(t, r); r.Status != http.StatusBadRequest || msg != c.want {
					t.Errorf("%s %s, stream %s: %d %s, want 400 %q", path, c.config, stream, r.Status, r.Body, c.want)
				}
			}
		}
	}
	if n := len(u.requests()); n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
	// Every level is taken by count_tokens as well.
	for _, effort := range []string{"low", "medium", "high", "xhigh", "max"} {
		r := post(t, s.Edge, "/v1/messages/count_tokens", `{"model":"qwen-7b","output_config":{"effort":"`+effort+`"},"messages":[{"role":"user","content":"x"}]}`)
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"input_tokens"`) {
			t.Errorf("count_tokens, effort %s: %d %s", effort, r.Status, r.Body)
		}
	}
}
