package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
)

// prefillText is the assistant prefill the tests send; prefillRest the
// continuation the imitated servers answer with when they continue it.
const (
	prefillText = `{"`
	prefillRest = `name": "Ada"}`
	newTurn     = `Sure! Here is the JSON you asked for.`
)

// prefillParams is a Messages request ending in an assistant prefill.
func prefillParams(model string, tools bool) anthropic.MessageNewParams {
	p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64, Messages: []anthropic.MessageParam{
		userText("Give me a JSON object with a name."),
		anthropic.NewAssistantMessage(anthropic.NewTextBlock(prefillText)),
	}}
	if tools {
		p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}}
	}
	return p
}

// lastMessage is the role and content of a chat body's last message.
func lastMessage(t *testing.T, chat map[string]json.RawMessage) (role, content string) {
	t.Helper()
	var msgs []struct{ Role, Content string }
	if err := json.Unmarshal(chat["messages"], &msgs); err != nil || len(msgs) == 0 {
		t.Fatalf("messages %s: %v", chat["messages"], err)
	}
	return msgs[len(msgs)-1].Role, msgs[len(msgs)-1].Content
}

// vllmCompletion is vLLM's whole answer with content.
func vllmCompletion(content string) string {
	b, _ := json.Marshal(content)
	return `{"id":"chatcmpl-9f1c","object":"chat.completion","created":1727000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":null,"content":` +
		string(b) + `,"tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":21,"total_tokens":27,"completion_tokens":6,"prompt_tokens_details":null},"prompt_logprobs":null}`
}

// A prefill reaches each kind of server in the body it continues it by, on
// a tunnel and on a run (a request with tools), in either order of a
// failover: vLLM gets continue_final_message true with
// add_generation_prompt false and its template's thinking off;
// llama.cpp's server, which continues a final assistant message by itself,
// gets its template's thinking off (it refuses a prefill with thinking on)
// and no vLLM member; any other OpenAI-compatible server (OpenAI refuses
// members it does not know) gets none of them. Each gets the prefill as
// the last message.
func TestMessagesPrefillMembersByProviderKind(t *testing.T) {
	eachThinkoffFailover(t, []failoverCase{
		{"vllm", "openai_compat", false}, {"openai_compat", "vllm", false},
		{"llamacpp", "openai_compat", false}, {"openai_compat", "llamacpp", false},
		{"vllm", "llamacpp", false}, {"llamacpp", "vllm", false},
		{"vllm", "openai_compat", true}, {"openai_compat", "vllm", true},
		{"llamacpp", "vllm", true},
	}, func(t *testing.T, c failoverCase, first, second *upstream, an anthropic.Client) {
		for _, stream := range []bool{false, true} {
			sendMessage(t, an, prefillParams("m", c.tools), stream)
		}
		eachFailoverChat(t, 2, first, second, c.first, c.second, func(typ string, chat map[string]json.RawMessage) {
			if role, content := lastMessage(t, chat); role != "assistant" || content != prefillText {
				t.Errorf("%s: last message %s %q", typ, role, content)
			}
			agp, cfm, kwargs := string(chat["add_generation_prompt"]), string(chat["continue_final_message"]), string(chat["chat_template_kwargs"])
			switch typ {
			case "vllm":
				if agp != "false" || cfm != "true" {
					t.Errorf("vllm: add_generation_prompt %q, continue_final_message %q", agp, cfm)
				}
				jsonEqual(t, kwargs, `{"enable_thinking":false}`)
			case "llamacpp":
				if agp != "" || cfm != "" {
					t.Errorf("llamacpp: add_generation_prompt %q, continue_final_message %q", agp, cfm)
				}
				jsonEqual(t, kwargs, `{"enable_thinking":false}`)
			default:
				if agp != "" || cfm != "" || kwargs != "" {
					t.Errorf("%s: add_generation_prompt %q, continue_final_message %q, chat_template_kwargs %q", typ, agp, cfm, kwargs)
				}
			}
		})
	})
}

// vllmPrefill imitates vLLM's chat completions on a prefill: both
// continuation members true is its 400; continue_final_message true with
// add_generation_prompt false continues the final message (the answer is
// the continuation only: echo is false by default); otherwise the final
// assistant message is closed and a new turn answers.
func vllmPrefill(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream               bool  `json:"stream"`
		AddGenerationPrompt  *bool `json:"add_generation_prompt"`
		ContinueFinalMessage bool  `json:"continue_final_message"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	agp := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
	if agp && req.ContinueFinalMessage {
		writeJSON(w, http.StatusBadRequest, `{"error":{"message":"[{'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, Cannot set both `+"`continue_final_message` and `add_generation_prompt`"+` to True.'}]","type":"Bad Request","param":null,"code":400}}`)
		return
	}
	answer := newTurn
	if req.ContinueFinalMessage {
		answer = prefillRest
	}
	writeAnswer(w, req.Stream, answer)
}

// writeAnswer answers content as a stream or a whole completion.
func writeAnswer(w http.ResponseWriter, stream bool, content string) {
	if stream {
		writeSSE(w, contentStream(content)...)
		return
	}
	writeJSON(w, http.StatusOK, vllmCompletion(content))
}

// On vLLM the answer to a prefill is its continuation, as Anthropic's API
// answers: the text after the prefill, not a new turn and not the prefill
// again; streamed and whole.
func TestMessagesPrefillContinuedOnVLLM(t *testing.T) {
	u := newUpstream(t, vllmPrefill)
	s := tunnelStack(t, u)
	an := anClient(t, s.Edge, "")
	for _, stream := range []bool{false, true} {
		m := sendMessage(t, an, prefillParams("qwen-7b", false), stream)
		if len(m.Content) != 1 || m.Content[0].Text != prefillRest || m.StopReason != anthropic.StopReasonEndTurn {
			t.Errorf("stream %v: %+v", stream, m.Content)
		}
	}
}

// llamaPrefill imitates llama-server's chat completions with a thinking
// template (Qwen 3): a final assistant message is continued (its
// prefill_assistant, on by default) unless the template's thinking is on,
// which it refuses with its invalid_request_error.
func llamaPrefill(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/slots" {
		writeJSON(w, http.StatusOK, `[{"id":0,"id_task":-1,"n_ctx":4096,"speculative":false,"is_processing":false}]`)
		return
	}
	var req struct {
		Stream   bool                    `json:"stream"`
		Messages []struct{ Role string } `json:"messages"`
		Kwargs   struct {
			EnableThinking *bool `json:"enable_thinking"`
		} `json:"chat_template_kwargs"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	if req.Messages[len(req.Messages)-1].Role == "assistant" && (req.Kwargs.EnableThinking == nil || *req.Kwargs.EnableThinking) {
		writeJSON(w, http.StatusBadRequest, `{"error":{"code":400,"message":"Assistant response prefill is incompatible with enable_thinking.","type":"invalid_request_error"}}`)
		return
	}
	writeAnswer(w, req.Stream, prefillRest)
}

// On llama.cpp's server a prefill is continued, its template's thinking
// turned off for it (which the server requires), streamed and whole.
func TestMessagesPrefillContinuedOnLlamaCpp(t *testing.T) {
	u := newUpstream(t, llamaPrefill)
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{thinkoffProvider("llama", config.ProviderTypeLlamaCpp, u)},
		modelOn("m", "llama", target)))
	an := anClient(t, e, "")
	for _, stream := range []bool{false, true} {
		m := sendMessage(t, an, prefillParams("m", false), stream)
		if len(m.Content) != 1 || m.Content[0].Text != prefillRest {
			t.Errorf("stream %v: %+v", stream, m.Content)
		}
	}
}

// On Ollama (a run) the prefill is the last message of /api/chat, which
// continues it in templates that leave the last assistant message open
// ($last), with think false: the continuation follows the prefill at once.
func TestMessagesPrefillOnOllama(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/version" {
			writeJSON(w, http.StatusOK, `{"version":"0.12.6"}`)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"model":"qwen3","created_at":"2025-05-29T09:35:57.033452Z","message":{"role":"assistant","content":"name\": \"Ada\"}"},"done":false}` + "\n" + histOllamaDone + "\n"))
	})
	e, _ := startStack(t, edgeConfig([]config.ProviderSpec{{Name: "ol", Type: "ollama", BaseURL: u.URL, Capacity: 4}},
		modelOn("qwen", "ol", "qwen3")))
	an := anClient(t, e, "")
	for _, stream := range []bool{false, true} {
		m := sendMessage(t, an, prefillParams("qwen", false), stream)
		if len(m.Content) != 1 || m.Content[0].Text != prefillRest {
			t.Errorf("stream %v: %+v", stream, m.Content)
		}
	}
	bodies := histOllamaBodies(u, "/api/chat")
	if len(bodies) != 2 {
		t.Fatalf("%d chats", len(bodies))
	}
	for _, b := range bodies {
		msgs := histOllamaMessages(t, b)
		if last := msgs[len(msgs)-1]; last["role"] != "assistant" || last["content"] != prefillText {
			t.Errorf("last message %v", last)
		}
		if string(b["think"]) != "false" {
			t.Errorf("think %s", b["think"])
		}
	}
}

// A prefill with thinking enabled is refused as Anthropic's API refuses
// it, a 400 invalid_request_error that reaches no backend; an empty final
// assistant message is no prefill (dropped, as before) and is answered.
func TestMessagesPrefillWithThinkingRefused(t *testing.T) {
	u := newUpstream(t, vllmPrefill)
	s := tunnelStack(t, u)
	for _, thinking := range []string{`{"type":"enabled","budget_tokens":1024}`, `{"type":"adaptive"}`} {
		r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":2048,"thinking":`+thinking+
			`,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"{\""}]}`)
		var env struct {
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal(r.Body, &env); err != nil || r.Status != http.StatusBadRequest || env.Error.Type != "invalid_request_error" ||
			!strings.Contains(env.Error.Message, "prefill") {
			t.Errorf("%s: %d %s", thinking, r.Status, r.Body)
		}
	}
	if n := len(u.requests()); n != 0 {
		t.Fatalf("the upstream got %d requests", n)
	}
	r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},`+
		`"messages":[{"role":"user","content":"x"},{"role":"assistant","content":""}]}`)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), newTurn) {
		t.Errorf("empty final assistant message: %d %s", r.Status, r.Body)
	}
	var chat map[string]json.RawMessage
	if err := json.Unmarshal(u.requests()[0].Body, &chat); err != nil || chat["continue_final_message"] != nil {
		t.Errorf("empty final assistant message: %s", u.requests()[0].Body)
	}
}
