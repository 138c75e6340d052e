package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// thinkoffKwargs is the member vLLM and llama-server read to render a
// Qwen3-style chat template without thinking.
const thinkoffKwargs = `{"enable_thinking":false}`

// thinkoffBusy is vLLM's ErrorResponse when its engine cannot take more.
const thinkoffBusy = `{"error":{"message":"engine overloaded","type":"ServiceUnavailableError","param":null,"code":503}}`

// thinkoffProvider is a provider of adapter type typ on u.
func thinkoffProvider(name, typ string, u *upstream) config.ProviderSpec {
	return config.ProviderSpec{Name: name, Type: typ, BaseURL: u.baseURL(), APIKeyEnv: keyEnv, Capacity: 4}
}

// thinkoffUpstream imitates vLLM, or llama-server (its /slots) with
// llama true: chat completions answer status with body.
func thinkoffUpstream(t *testing.T, status int, body string) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slots" {
			writeJSON(w, http.StatusOK, `[{"id":0,"id_task":-1,"n_ctx":4096,"speculative":false,"is_processing":false}]`)
			return
		}
		writeJSON(w, status, body)
	})
}

// thinkoffChats is what u received on /v1/chat/completions, decoded.
func thinkoffChats(t *testing.T, u *upstream) []map[string]json.RawMessage {
	t.Helper()
	var out []map[string]json.RawMessage
	for _, r := range u.requests() {
		if !strings.HasSuffix(r.Path, "/chat/completions") {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatalf("upstream body %s: %v", r.Body, err)
		}
		out = append(out, m)
	}
	return out
}

// eachFailoverChat checks that first and second (of adapter types
// firstType and secondType) each got n chat requests, and calls check on
// every one with its upstream's type.
func eachFailoverChat(t *testing.T, n int, first, second *upstream, firstType, secondType string, check func(typ string, chat map[string]json.RawMessage)) {
	t.Helper()
	for _, p := range []struct {
		u   *upstream
		typ string
	}{{first, firstType}, {second, secondType}} {
		chats := thinkoffChats(t, p.u)
		if len(chats) != n {
			t.Fatalf("%s got %d chat requests, want %d", p.typ, len(chats), n)
		}
		for _, chat := range chats {
			check(p.typ, chat)
		}
	}
}

// thinkoffFailover starts model m on two providers tried in order: the
// first, of type firstType, answers 503; the second, of type secondType,
// answers; mut edit the config before the stack starts.
func thinkoffFailover(t *testing.T, firstType, secondType string, mut ...func(*config.Edge)) (first, second *upstream, e *stack.Edge) {
	t.Helper()
	first = thinkoffUpstream(t, http.StatusServiceUnavailable, thinkoffBusy)
	second = thinkoffUpstream(t, http.StatusOK, vllmChatJSON)
	cfg := edgeConfig([]config.ProviderSpec{thinkoffProvider("first", firstType, first), thinkoffProvider("second", secondType, second)})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "ordered", MaxAttempts: 2, Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "first", Target: target}, {Node: nodeID, Provider: "second", Target: target}}}}
	for _, m := range mut {
		m(cfg)
	}
	e, _ = startStack(t, cfg)
	return first, second, e
}

// thinkoffParams is a Messages request with thinking turned off.
func thinkoffParams(tools bool) anthropic.MessageNewParams {
	off := anthropic.NewThinkingConfigDisabledParam()
	p := anthropic.MessageNewParams{Model: "m", MaxTokens: 64, Thinking: anthropic.ThinkingConfigParamUnion{OfDisabled: &off},
		Messages: []anthropic.MessageParam{userText("Hi")}}
	if tools {
		p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}}
	}
	return p
}

// Thinking off on a tunnel is rendered for each attempt's provider: vLLM
// (and llama.cpp) get chat_template_kwargs turning the template's thinking
// off; a generic OpenAI-compatible server (OpenAI itself refuses members it
// does not know) gets nothing new, in either order of a failover. Requests
// with tools take the run path on these providers, and get the same.
func TestThinkingOffTemplateFollowsFailover(t *testing.T) {
	eachThinkoffFailover(t, []failoverCase{
		{"vllm", "openai_compat", false},
		{"openai_compat", "vllm", false},
		{"llamacpp", "openai_compat", false},
		{"openai_compat", "llamacpp", false},
		{"vllm", "openai_compat", true},
		{"openai_compat", "vllm", true},
	}, func(t *testing.T, c failoverCase, first, second *upstream, an anthropic.Client) {
		msg, err := an.Messages.New(ctxT(t), thinkoffParams(c.tools))
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != "Hello! How can I help you today?" {
			t.Fatalf("answer %+v", msg.Content)
		}
		eachFailoverChat(t, 1, first, second, c.first, c.second, func(typ string, chat map[string]json.RawMessage) {
			got, ok := chat["chat_template_kwargs"]
			if typ == "openai_compat" {
				if ok {
					t.Errorf("openai_compat got chat_template_kwargs %s", got)
				}
			} else if string(got) != thinkoffKwargs {
				t.Errorf("%s got chat_template_kwargs %q, want %s", typ, got, thinkoffKwargs)
			}
			if _, ok := chat["reasoning_effort"]; ok {
				t.Errorf("%s got reasoning_effort", typ)
			}
		})
	})
}

// failoverCase is a failover from a provider of type first to one of type
// second, the request offering tools or not.
type failoverCase struct {
	first, second string
	tools         bool
}

// eachThinkoffFailover runs f in a subtest per case, against a
// thinkoffFailover stack of the case's two provider types and a Messages
// client of its edge.
func eachThinkoffFailover(t *testing.T, cases []failoverCase, f func(t *testing.T, c failoverCase, first, second *upstream, an anthropic.Client)) {
	t.Helper()
	for _, c := range cases {
		name := c.first + "_then_" + c.second
		if c.tools {
			name += "_tools"
		}
		t.Run(name, func(t *testing.T) {
			first, second, e := thinkoffFailover(t, c.first, c.second)
			f(t, c, first, second, anClient(t, e, ""))
		})
	}
}

// Thinking enabled, adaptive or not given leaves vLLM's chat template as
// the model's default, streamed or not.
func TestThinkingOnLeavesTemplateAlone(t *testing.T) {
	u := newUpstream(t, vllmHello("Hello"))
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{vllmProvider("v", u.baseURL())}, modelOn("m", "v", target)))
	an := anClient(t, e, "")
	adaptive := anthropic.ThinkingConfigAdaptiveParam{}
	off := anthropic.NewThinkingConfigDisabledParam()
	for _, c := range []struct {
		name     string
		thinking anthropic.ThinkingConfigParamUnion
		want     string
	}{
		{"enabled", anthropic.ThinkingConfigParamOfEnabled(1024), ""},
		{"adaptive", anthropic.ThinkingConfigParamUnion{OfAdaptive: &adaptive}, ""},
		{"absent", anthropic.ThinkingConfigParamUnion{}, ""},
		{"disabled", anthropic.ThinkingConfigParamUnion{OfDisabled: &off}, thinkoffKwargs},
	} {
		p := anthropic.MessageNewParams{Model: "m", MaxTokens: 2048, Thinking: c.thinking, Messages: []anthropic.MessageParam{userText("Hi")}}
		for _, stream := range []bool{false, true} {
			if stream {
				msg := accumulate(t, an.Messages.NewStreaming(ctxT(t), p))
				if len(msg.Content) != 1 || msg.Content[0].Text != "Hello" {
					t.Errorf("%s, stream: answer %+v", c.name, msg.Content)
				}
			} else if _, err := an.Messages.New(ctxT(t), p); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			chats := thinkoffChats(t, u)
			if got := string(chats[len(chats)-1]["chat_template_kwargs"]); got != c.want {
				t.Errorf("%s, stream %v: chat_template_kwargs %q, want %q", c.name, stream, got, c.want)
			}
		}
	}
}
