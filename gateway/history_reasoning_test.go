package gateway_test

// Reasoning sent back in the conversation: an agent resends the assistant
// turn with the reasoning the edge gave it, and a backend that takes
// earlier reasoning gets it. End to end over loopback: the official SDKs,
// the edge, a real node and its ollama adapter, and an httptest server
// answering as Ollama does.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// Lines of a thinking model (qwen3) on Ollama's /api/chat, as json.Marshal
// of api.ChatResponse writes them: thinking, then a tool call; or, once
// the tool answered, the answer.
const (
	histOllamaThink1 = `{"model":"qwen3","created_at":"2025-05-29T09:35:56.836222Z","message":{"role":"assistant","content":"","thinking":"The user wants weather."},"done":false}`
	histOllamaThink2 = `{"model":"qwen3","created_at":"2025-05-29T09:35:56.857389Z","message":{"role":"assistant","content":"","thinking":" Call the tool."},"done":false}`
	histOllamaCall   = `{"model":"qwen3","created_at":"2025-05-27T22:54:58.100509Z","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_ol1","function":{"index":0,"name":"get_weather","arguments":{"city":"Paris"}}}]},"done":false}`
	histOllamaAns    = `{"model":"qwen3","created_at":"2025-05-29T09:35:57.033452Z","message":{"role":"assistant","content":"It is 18C."},"done":false}`
	histOllamaDone   = `{"model":"qwen3","created_at":"2025-05-29T09:35:57.054117Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":1523400125,"load_duration":20125458,"prompt_eval_count":15,"prompt_eval_duration":110432042,"eval_count":44,"eval_duration":1391825167}`

	histGenLine = `{"model":"qwen3","created_at":"2025-05-29T09:40:11.201187Z","response":"Blue","done":false}`
	histGenDone = `{"model":"qwen3","created_at":"2025-05-29T09:40:11.222651Z","response":"","done":true,"done_reason":"stop","total_duration":412218083,"load_duration":18316750,"prompt_eval_count":12,"prompt_eval_duration":30118125,"eval_count":9,"eval_duration":362908208}`

	histReasoning = "The user wants weather. Call the tool."
)

// histOllamaStack is an edge and a real node whose "qwen" model is served
// by the ollama adapter against u, an Ollama imitation: /api/chat thinks
// and calls get_weather until a tool result is in the conversation, then
// answers; /api/generate answers "Blue".
func histOllamaStack(t *testing.T) (*stack.Edge, *upstream) {
	t.Helper()
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		var lines []string
		switch r.URL.Path {
		case "/api/version":
			writeJSON(w, http.StatusOK, `{"version":"0.12.6"}`)
			return
		case "/api/chat":
			var body struct {
				Messages []struct {
					Role string `json:"role"`
				} `json:"messages"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			lines = []string{histOllamaThink1, histOllamaThink2, histOllamaCall, histOllamaDone}
			if n := len(body.Messages); n > 0 && body.Messages[n-1].Role == "tool" {
				lines = []string{histOllamaAns, histOllamaDone}
			}
		case "/api/generate":
			lines = []string{histGenLine, histGenDone}
		default:
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		for _, l := range lines {
			_, _ = w.Write([]byte(l + "\n"))
			w.(http.Flusher).Flush()
		}
	})
	cfg := edgeConfig([]config.ProviderSpec{{Name: "ol", Type: "ollama", BaseURL: u.URL, Capacity: 4}},
		modelOn("qwen", "ol", "qwen3"))
	e, _ := startStack(t, cfg)
	return e, u
}

// histOllamaBodies are the bodies Ollama got on path, in order.
func histOllamaBodies(u *upstream, path string) []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	for _, r := range u.requests() {
		if r.Path != path {
			continue
		}
		var m map[string]json.RawMessage
		_ = json.Unmarshal(r.Body, &m)
		out = append(out, m)
	}
	return out
}

// histOllamaMessages decodes the messages of an /api/chat body.
func histOllamaMessages(t *testing.T, body map[string]json.RawMessage) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		t.Fatalf("messages %s: %v", body["messages"], err)
	}
	return msgs
}

// An openai-go agent loop: the first answer carries message.reasoning and
// a tool call; the agent sends that turn back with its reasoning (as
// "reasoning", or as "reasoning_content" as DeepSeek's clients name it)
// and the tool's result, and Ollama gets the reasoning as the assistant
// message's thinking. A reasoning that is not a string is the caller's
// 400, in OpenAI's envelope, and reaches no backend.
func TestOllamaHistoryReasoningFromOpenAIClient(t *testing.T) {
	e, u := histOllamaStack(t)
	cl := oaGoClient(t, e)
	tools := []oai.ChatCompletionToolUnionParam{oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"})}
	first, err := cl.Chat.Completions.New(ctxT(t), oai.ChatCompletionNewParams{Model: "qwen", Tools: tools,
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Weather in Paris?")}})
	if err != nil {
		t.Fatal(err)
	}
	msg := first.Choices[0].Message
	var reasoning string
	if err := json.Unmarshal([]byte(msg.JSON.ExtraFields["reasoning"].Raw()), &reasoning); err != nil || reasoning != histReasoning || len(msg.ToolCalls) != 1 {
		t.Fatalf("first answer %s", msg.RawJSON())
	}
	for _, name := range []string{"reasoning", "reasoning_content"} {
		asst := msg.ToAssistantMessageParam()
		asst.SetExtraFields(map[string]any{name: reasoning})
		resp, err := cl.Chat.Completions.New(ctxT(t), oai.ChatCompletionNewParams{Model: "qwen", Tools: tools,
			Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Weather in Paris?"),
				{OfAssistant: &asst}, oai.ToolMessage("18C", msg.ToolCalls[0].ID)}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if resp.Choices[0].Message.Content != "It is 18C." {
			t.Errorf("%s: answer %s", name, resp.Choices[0].Message.RawJSON())
		}
		bodies := histOllamaBodies(u, "/api/chat")
		got := histOllamaMessages(t, bodies[len(bodies)-1])
		if len(got) != 3 || got[1]["role"] != "assistant" || got[1]["thinking"] != histReasoning || got[1]["tool_calls"] == nil {
			t.Errorf("%s: Ollama got messages %v", name, got)
		}
		if _, ok := got[0]["thinking"]; ok {
			t.Errorf("%s: the user message carries thinking: %v", name, got[0])
		}
	}

	sent := len(histOllamaBodies(u, "/api/chat"))
	asst := msg.ToAssistantMessageParam()
	asst.SetExtraFields(map[string]any{"reasoning": map[string]any{"text": reasoning}})
	_, err = cl.Chat.Completions.New(ctxT(t), oai.ChatCompletionNewParams{Model: "qwen", Tools: tools,
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Weather in Paris?"),
			{OfAssistant: &asst}, oai.ToolMessage("18C", msg.ToolCalls[0].ID)}})
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "messages[1].reasoning" ||
		apiErr.Type != "invalid_request_error" {
		t.Fatalf("err = %v, want a 400 naming messages[1].reasoning", err)
	}
	if n := len(histOllamaBodies(u, "/api/chat")); n != sent {
		t.Errorf("the refused request reached Ollama (%d requests, %d before)", n, sent)
	}
}

// An Anthropic SDK agent loop with thinking enabled: the answer's thinking
// block goes back with the turn (Message.ToParam, signature and all), and
// Ollama gets its text as the assistant message's thinking.
func TestOllamaHistoryThinkingFromAnthropicClient(t *testing.T) {
	e, u := histOllamaStack(t)
	an := anClient(t, e, "")
	tool := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}
	p := anthropic.MessageNewParams{Model: "qwen", MaxTokens: 2048, Tools: []anthropic.ToolUnionParam{tool},
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024), Messages: []anthropic.MessageParam{userText("Weather in Paris?")}}
	first, err := an.Messages.New(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Content) != 2 || first.Content[0].Type != "thinking" || first.Content[0].Thinking != histReasoning || first.Content[1].Type != "tool_use" {
		t.Fatalf("first answer %+v", first.Content)
	}
	p.Messages = append(p.Messages, first.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(first.Content[1].ID, "18C", false)))
	resp := accumulate(t, an.Messages.NewStreaming(ctxT(t), p))
	if n := len(resp.Content); n == 0 || resp.Content[n-1].Text != "It is 18C." {
		t.Errorf("answer %+v", resp.Content)
	}
	bodies := histOllamaBodies(u, "/api/chat")
	got := histOllamaMessages(t, bodies[len(bodies)-1])
	if len(got) != 3 || got[1]["role"] != "assistant" || got[1]["thinking"] != histReasoning || got[1]["tool_calls"] == nil || got[2]["role"] != "tool" {
		t.Errorf("Ollama got messages %v", got)
	}
}

// A completion's reasoning_effort reaches /api/generate as think; an
// effort Ollama has no tier for is the caller's 400 and reaches no
// backend.
func TestOllamaCompletionReasoningEffort(t *testing.T) {
	e, u := histOllamaStack(t)
	r := post(t, e, "/v1/completions", `{"model":"qwen","prompt":"a haiku","reasoning_effort":"high"}`)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"Blue"`) {
		t.Fatalf("completion %d: %s", r.Status, r.Body)
	}
	bodies := histOllamaBodies(u, "/api/generate")
	if len(bodies) != 1 || string(bodies[0]["think"]) != `"high"` {
		t.Fatalf("Ollama got %v", bodies)
	}
	r = post(t, e, "/v1/completions", `{"model":"qwen","prompt":"a haiku","reasoning_effort":"extreme"}`)
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"invalid_request_error"`) || !strings.Contains(string(r.Body), "extreme") {
		t.Fatalf("bad effort %d: %s", r.Status, r.Body)
	}
	if n := len(histOllamaBodies(u, "/api/generate")); n != 1 {
		t.Errorf("the refused completion reached Ollama (%d requests)", n)
	}
}

// On a vLLM tunnel the Messages request's thinking goes as the assistant
// message's reasoning, the member vLLM reads (other kinds of server:
// TestMessagesTunnelReasoningByProviderKind). The signature does not go.
func TestAnthropicTunnelHistoryThinking(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"id":"chatcmpl-1","object":"chat.completion","created":1727000000,"model":"m",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Sure."},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)
	})
	s := tunnelStack(t, u)
	an := anClient(t, s.Edge, "")
	_, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64, Messages: []anthropic.MessageParam{
		userText("Hi"),
		anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("EqQBCkYIBxgC", "Greet back."), anthropic.NewTextBlock("Hello!")),
		userText("More"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := u.requests()
	if len(reqs) == 0 {
		t.Fatal("no request reached the upstream")
	}
	body := reqs[len(reqs)-1].Body
	var chat struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(body, &chat); err != nil || len(chat.Messages) != 3 {
		t.Fatalf("upstream body %s: %v", body, err)
	}
	if m := chat.Messages[1]; m["role"] != "assistant" || m["content"] != "Hello!" || m["reasoning"] != "Greet back." || len(m) != 3 {
		t.Errorf("assistant message %v", m)
	}
	if strings.Contains(string(body), "EqQBCkYIBxgC") {
		t.Errorf("upstream body %s", body)
	}
}
