package gateway_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// mockStack serves model "demo" from the node's mock adapter.
func mockStack(t *testing.T, settings map[string]any) *stackT {
	t.Helper()
	e, n := startStack(t, edgeConfig([]config.ProviderSpec{mockProvider("mock", settings)}, modelOn("demo", "mock", "mock-echo")))
	return &stackT{Edge: e, Node: n}
}

// A normalized run rendered as one chat.completion.
func TestRunMockNonStream(t *testing.T) {
	s := mockStack(t, nil)
	resp, err := oaClient(t, s.Edge, "k").CreateChatCompletion(ctxT(t), openai.ChatCompletionRequest{
		Model: "demo",
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "be brief"},
			{Role: openai.ChatMessageRoleUser, Content: "hello brave  new world"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The response names the provider's target (what served it), as the
	// tunnel route does.
	if resp.Object != "chat.completion" || resp.Model != "mock-echo" || !strings.HasPrefix(resp.ID, "chatcmpl-") {
		t.Errorf("envelope: object %q model %q id %q", resp.Object, resp.Model, resp.ID)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("choices %+v", resp.Choices)
	}
	c := resp.Choices[0]
	if c.Message.Role != "assistant" || c.Message.Content != "hello brave new world" || c.FinishReason != openai.FinishReasonStop {
		t.Errorf("choice %+v", c)
	}
	// Mock usage: words of all messages, one completion token per delta.
	if resp.Usage.PromptTokens != 6 || resp.Usage.CompletionTokens != 4 || resp.Usage.TotalTokens != 10 {
		t.Errorf("usage %+v", resp.Usage)
	}
	stack.WaitFor(t, waitLong, "iop_requests_total{route=run,code=200}", func() bool {
		return metric(t, s.Registry, "iop_requests_total", map[string]string{"model": "demo", "route": "run", "code": "200"}) == 1
	})
}

// A streamed run: role chunk first, content deltas, the finish chunk, the
// usage chunk (include_usage), then [DONE] as the very last event.
func TestRunMockStream(t *testing.T) {
	s := mockStack(t, nil)
	r := post(t, s.Edge, "/v1/chat/completions",
		`{"model":"demo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"one two three"}]}`)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d Content-Type %q: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if !strings.HasSuffix(string(r.Body), "data: [DONE]\n\n") {
		t.Errorf("stream does not end with [DONE]: %q", r.Body)
	}
	events := readEvents(t, r.Body)
	if len(events) < 5 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events %q", events)
	}
	type chunkT struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Delta struct {
				Role    string  `json:"role"`
				Content *string `json:"content"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *openai.Usage `json:"usage"`
	}
	var chunks []chunkT
	for _, ev := range events[:len(events)-1] {
		var c chunkT
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		if c.Object != "chat.completion.chunk" || c.Model != "mock-echo" || (len(chunks) > 0 && c.ID != chunks[0].ID) {
			t.Errorf("chunk envelope %q", ev)
		}
		chunks = append(chunks, c)
	}
	first := chunks[0]
	if len(first.Choices) != 1 || first.Choices[0].Delta.Role != "assistant" {
		t.Errorf("first chunk is not the role chunk: %s", events[0])
	}
	var content strings.Builder
	for _, c := range chunks[:len(chunks)-2] {
		if len(c.Choices) != 1 || c.Choices[0].FinishReason != nil {
			t.Errorf("content chunk %+v", c)
			continue
		}
		if c.Choices[0].Delta.Content != nil {
			content.WriteString(*c.Choices[0].Delta.Content)
		}
	}
	if content.String() != "one two three" {
		t.Errorf("content %q", content.String())
	}
	fin := chunks[len(chunks)-2]
	if len(fin.Choices) != 1 || fin.Choices[0].FinishReason == nil || *fin.Choices[0].FinishReason != "stop" {
		t.Errorf("finish chunk %s", events[len(events)-3])
	}
	u := chunks[len(chunks)-1]
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.PromptTokens != 3 || u.Usage.CompletionTokens != 3 || u.Usage.TotalTokens != 6 {
		t.Errorf("usage chunk %s", events[len(events)-2])
	}
	waitReleased(t, s.Edge, "mock")
}

// toolFallbackUpstream answers like vLLM without --enable-auto-tool-choice:
// 400 for any request with tools; the retry (no tools, instruction merged
// into the system message) gets a stream whose text carries a tool call.
func toolFallbackUpstream(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req map[string]json.RawMessage
		_ = json.Unmarshal(body, &req)
		if _, ok := req["tools"]; ok {
			writeJSON(w, http.StatusBadRequest, vllmToolChoiceError)
			return
		}
		writeSSE(w, contentStream(`<tool_call>{"name": "get_weather", `, `"arguments": {"city": "Paris"}}`, `</tool_call>`)...)
	})
}

func toolFallbackStack(t *testing.T, u *upstream) *stackT {
	t.Helper()
	e, n := startStack(t, edgeConfig([]config.ProviderSpec{vllmProvider("vllm-main", u.baseURL())}, modelOn("qwen-7b", "vllm-main", target)))
	return &stackT{Edge: e, Node: n}
}

var toolRequest = openai.ChatCompletionRequest{
	Model: "qwen-7b",
	Messages: []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: "You are a weather bot."},
		{Role: openai.ChatMessageRoleUser, Content: "Weather in Paris?"},
	},
	Tools: []openai.Tool{weatherTool()},
}

// checkFallbackRequests: first attempt with native tools, then the retry
// without tools/tool_choice and with the instruction in the system message.
func checkFallbackRequests(t *testing.T, u *upstream) {
	t.Helper()
	seen := u.requests()
	if len(seen) != 2 {
		t.Fatalf("upstream saw %d requests, want 2 (native attempt, text retry)", len(seen))
	}
	var first, second struct {
		Model    string            `json:"model"`
		Stream   bool              `json:"stream"`
		Tools    []json.RawMessage `json:"tools"`
		Choice   json.RawMessage   `json:"tool_choice"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(seen[0].Body, &first)
	_ = json.Unmarshal(seen[1].Body, &second)
	if len(first.Tools) != 1 || first.Model != target {
		t.Errorf("first attempt %s", seen[0].Body)
	}
	if second.Tools != nil || second.Choice != nil || !second.Stream || second.Model != target {
		t.Errorf("retry %s", seen[1].Body)
	}
	if len(second.Messages) != 2 || second.Messages[0].Role != "system" ||
		!strings.Contains(second.Messages[0].Content, "You are a weather bot.") ||
		!strings.Contains(second.Messages[0].Content, "<tool_call>") ||
		!strings.Contains(second.Messages[0].Content, "get_weather") {
		t.Errorf("retry messages %+v", second.Messages)
	}
	for _, r := range seen {
		if r.Header.Get("Authorization") != "Bearer "+upstreamKey {
			t.Errorf("upstream Authorization %q", r.Header.Get("Authorization"))
		}
	}
}

// tool_mode auto on a vLLM that rejects native tools: the node falls back
// to text tool calls and the edge restores them as OpenAI tool_calls.
func TestRunTextToolFallbackNonStream(t *testing.T) {
	u := toolFallbackUpstream(t)
	s := toolFallbackStack(t, u)
	resp, err := oaClient(t, s.Edge, "k").CreateChatCompletion(ctxT(t), toolRequest)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("choices %+v", resp.Choices)
	}
	c := resp.Choices[0]
	if c.FinishReason != openai.FinishReasonToolCalls || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("choice %+v", c)
	}
	tc := c.Message.ToolCalls[0]
	if !strings.HasPrefix(tc.ID, "call_") || tc.Type != openai.ToolTypeFunction || tc.Function.Name != "get_weather" {
		t.Errorf("tool call %+v", tc)
	}
	jsonEqual(t, tc.Function.Arguments, `{"city":"Paris"}`)
	if strings.Contains(c.Message.Content, "<tool_call>") || strings.TrimSpace(c.Message.Content) != "" {
		t.Errorf("content still carries the block: %q", c.Message.Content)
	}
	checkFallbackRequests(t, u)
	waitReleased(t, s.Edge, "vllm-main")
	stack.WaitFor(t, waitLong, "iop_requests_total{route=run,code=200}", func() bool {
		return metric(t, s.Registry, "iop_requests_total", map[string]string{"model": "qwen-7b", "route": "run", "code": "200"}) == 1
	})
}

func TestRunTextToolFallbackStream(t *testing.T) {
	u := toolFallbackUpstream(t)
	s := toolFallbackStack(t, u)
	req := toolRequest
	req.Stream = true
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	st, err := oaClient(t, s.Edge, "k").CreateChatCompletionStream(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	got := readSDKStream(t, st)
	if got.finish != openai.FinishReasonToolCalls {
		t.Errorf("finish_reason %q", got.finish)
	}
	if len(got.calls) != 1 || got.calls[0] == nil {
		t.Fatalf("tool calls %+v", got.calls)
	}
	c := got.calls[0]
	if !strings.HasPrefix(c.id, "call_") || c.typ != "function" || c.name != "get_weather" {
		t.Errorf("tool call %+v", *c)
	}
	jsonEqual(t, c.args, `{"city":"Paris"}`)
	if strings.Contains(got.content, "tool_call") || strings.TrimSpace(got.content) != "" {
		t.Errorf("content %q", got.content)
	}
	if usage := got.usage; usage == nil || usage.PromptTokens != 12 || usage.CompletionTokens != 3 {
		t.Errorf("usage %+v", usage)
	}
	checkFallbackRequests(t, u)
	waitReleased(t, s.Edge, "vllm-main")
}

// A run failing after its first byte ends with an SSE error event and no
// [DONE]; the same failure without streaming is a 502 before any byte.
func TestRunFailsAfterFirstByte(t *testing.T) {
	s := mockStack(t, map[string]any{"fail_trigger": "explode now please"})
	r := post(t, s.Edge, "/v1/chat/completions",
		`{"model":"demo","stream":true,"messages":[{"role":"user","content":"explode now please"}]}`)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	events := readEvents(t, r.Body)
	if len(events) < 2 {
		t.Fatalf("events %q", events)
	}
	if !strings.Contains(events[0], `"role":"assistant"`) || !strings.Contains(string(r.Body), `"content":"explode"`) {
		t.Errorf("no content before the failure: %q", r.Body)
	}
	last := events[len(events)-1]
	if !strings.HasPrefix(last, `{"error":`) {
		t.Fatalf("last event is not an error: %q", last)
	}
	checkEnvelope(t, []byte(last), "upstream_error")
	if strings.Contains(string(r.Body), "[DONE]") {
		t.Errorf("failed stream carries [DONE]: %q", r.Body)
	}
	if !strings.HasSuffix(string(r.Body), "\n\n") {
		t.Errorf("error event not terminated: %q", r.Body)
	}

	// The SDK surfaces it as an error, not as a clean end.
	req := openai.ChatCompletionRequest{Model: "demo", Stream: true,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "explode now please"}}}
	st, err := oaClient(t, s.Edge, "k").CreateChatCompletionStream(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	var streamErr error
	for streamErr == nil {
		_, streamErr = st.Recv()
	}
	st.Close()
	if errors.Is(streamErr, io.EOF) || !strings.Contains(streamErr.Error(), "mock failure") {
		t.Errorf("SDK stream error %v, want the provider's failure", streamErr)
	}

	nr := post(t, s.Edge, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"explode now please"}]}`)
	assertError(t, nr, http.StatusBadGateway, "upstream_error")
	waitReleased(t, s.Edge, "mock")
	stack.WaitFor(t, waitLong, "lease released with reason error", func() bool {
		return metric(t, s.Registry, "iop_lease_released_total", map[string]string{"node": nodeID, "provider": "mock", "reason": "error"}) == 3
	})
}

// Completions and embeddings over the mock run path.
func TestRunMockCompletionsAndEmbeddings(t *testing.T) {
	s := mockStack(t, nil)
	cl := oaClient(t, s.Edge, "k")
	cr, err := cl.CreateCompletion(ctxT(t), openai.CompletionRequest{Model: "demo", Prompt: "alpha beta"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cr.Choices) != 1 || cr.Choices[0].Text != "alpha beta" || cr.Choices[0].FinishReason != "stop" {
		t.Errorf("completion %+v", cr)
	}
	er, err := cl.CreateEmbeddings(ctxT(t), openai.EmbeddingRequestStrings{Model: "demo", Input: []string{"a b", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(er.Data) != 2 || len(er.Data[0].Embedding) == 0 || er.Data[1].Index != 1 || er.Usage.PromptTokens != 3 {
		t.Errorf("embeddings %+v", er)
	}
	// /v1/responses is passthrough only: a run-only model refuses it.
	r := post(t, s.Edge, "/v1/responses", `{"model":"demo","input":"hi"}`)
	assertError(t, r, http.StatusBadRequest, "invalid_request")
	waitReleased(t, s.Edge, "mock")
}
