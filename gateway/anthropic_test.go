package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
)

// anClient is the official Anthropic Go SDK pointed at the edge.
func anClient(t *testing.T, e *stack.Edge, key string) anthropic.Client {
	t.Helper()
	return anthropic.NewClient(option.WithBaseURL(e.URL), option.WithAPIKey(key),
		option.WithHTTPClient(httpClient(t)), option.WithMaxRetries(0))
}

func userText(s string) anthropic.MessageParam {
	return anthropic.NewUserMessage(anthropic.NewTextBlock(s))
}

// Tunnel path: the upstream gets an OpenAI chat request built at the edge
// and its answer comes back as a Messages answer, non-stream and stream.
func TestAnthropicTunnelNonStreamAndStream(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req struct {
			Stream   bool              `json:"stream"`
			Model    string            `json:"model"`
			Messages []json.RawMessage `json:"messages"`
			MaxTok   int               `json:"max_tokens"`
		}
		if err := json.Unmarshal(b, &req); err != nil || req.Model != target || req.MaxTok != 64 || len(req.Messages) != 2 {
			writeJSON(w, http.StatusBadRequest, `{"error":{"message":"unexpected request","type":"BadRequestError","param":null,"code":400}}`)
			return
		}
		if !req.Stream {
			writeJSON(w, http.StatusOK, vllmChatJSON)
			return
		}
		writeSSE(w, contentStream("Hello", " world")...)
	})
	s := tunnelStack(t, u)
	cl := anClient(t, s.Edge, "")
	params := anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64,
		System:   []anthropic.TextBlockParam{{Text: "be brief"}},
		Messages: []anthropic.MessageParam{userText("Hi")}}

	msg, err := cl.Messages.New(ctxT(t), params)
	if err != nil {
		t.Fatalf("Messages.New: %v", err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello! How can I help you today?" || msg.StopReason != anthropic.StopReasonEndTurn ||
		msg.Usage.InputTokens != 20 || msg.Usage.OutputTokens != 10 {
		t.Fatalf("message = %+v", msg)
	}

	acc := accumulate(t, cl.Messages.NewStreaming(ctxT(t), params))
	if len(acc.Content) != 1 || acc.Content[0].Text != "Hello world" || acc.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("streamed message = %+v", acc)
	}
}

// Run path (mock provider): the normalized run renders back as Messages,
// streamed and not; errors and auth use Anthropic's shape, x-api-key is
// accepted, and GET /v1/models answers in Anthropic's list shape.
func TestAnthropicRunPathErrorsAndAuth(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "echo"))
	cfg.Auth.APIKeys = []string{"sk-client"}
	e, _ := startStack(t, cfg)
	cl := anClient(t, e, "sk-client")

	msg, err := cl.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "demo", MaxTokens: 16,
		Messages: []anthropic.MessageParam{userText("one two three")}})
	if err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "one two three" || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("run message = %+v, %v", msg, err)
	}
	stream := cl.Messages.NewStreaming(ctxT(t), anthropic.MessageNewParams{Model: "demo", MaxTokens: 16,
		Messages: []anthropic.MessageParam{userText("a b c d")}})
	var acc anthropic.Message
	events := 0
	for stream.Next() {
		events++
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := stream.Err(); err != nil || acc.Content[0].Text != "a b c d" || events < 6 {
		t.Fatalf("streamed = %+v (%d events), %v", acc, events, err)
	}
	// On the wire (the SDK hides pings): one ping, after message_start.
	raw := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/messages", `{"model":"demo","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"x y"}]}`,
		map[string]string{"x-api-key": "sk-client"})
	body := string(raw.Body)
	if strings.Count(body, "event: ping\n") != 1 || strings.Index(body, "event: ping") < strings.Index(body, "event: message_start") ||
		!strings.HasSuffix(body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Fatalf("raw stream:\n%s", body)
	}

	// Unknown model: 404 not_found_error through the SDK's typed error.
	_, err = cl.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "nope", MaxTokens: 16, Messages: []anthropic.MessageParam{userText("x")}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || !strings.Contains(ae.RawJSON(), `"not_found_error"`) {
		t.Fatalf("unknown model: %v", err)
	}
	// Wrong key: 401 authentication_error in Anthropic's envelope.
	bad := anClient(t, e, "wrong")
	_, err = bad.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "demo", MaxTokens: 16, Messages: []anthropic.MessageParam{userText("x")}})
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized || !strings.Contains(ae.RawJSON(), `"authentication_error"`) {
		t.Fatalf("wrong key: %v", err)
	}
	// A malformed request: 400 invalid_request_error with request-id.
	r := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/messages", `{"model":"demo","messages":[]}`,
		map[string]string{"x-api-key": "sk-client", "anthropic-version": "2023-06-01"})
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"type":"error"`) ||
		!strings.Contains(string(r.Body), `"invalid_request_error"`) || r.Header.Get("request-id") == "" {
		t.Fatalf("bad request: %d %s %v", r.Status, r.Body, r.Header)
	}
	// count_tokens is an estimate; models list in Anthropic's shape.
	r = do(t, httpClient(t), http.MethodPost, e.URL+"/v1/messages/count_tokens", `{"model":"demo","messages":[{"role":"user","content":"hello there"}]}`,
		map[string]string{"x-api-key": "sk-client"})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"input_tokens":`) {
		t.Fatalf("count_tokens: %d %s", r.Status, r.Body)
	}
	page, err := cl.Models.List(ctxT(t), anthropic.ModelListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "demo" {
		t.Fatalf("models = %+v, %v", page, err)
	}
	// The surface is labelled: the 404 above counts under anthropic.
	if got := metric(t, e.Registry, "iop_surface_requests_total", map[string]string{"surface": "anthropic", "code": "404"}); got != 1 {
		t.Fatalf("iop_surface_requests_total{anthropic,404} = %v, want 1", got)
	}
}

// Tool use round trip on the tunnel path: the upstream's tool call comes
// back as a tool_use block, and the tool_result the client sends next
// reaches the upstream as a tool message answering that call.
func TestAnthropicToolUseRoundTrip(t *testing.T) {
	seen := make(chan []byte, 4)
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- b
		writeJSON(w, http.StatusOK, vllmToolCallJSON)
	})
	s := tunnelStack(t, u, func(c *config.Edge) { c.Nodes[0].Providers[0].ToolMode = "native" })
	cl := anClient(t, s.Edge, "")
	tool := anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}
	params := anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64, Tools: []anthropic.ToolUnionParam{{OfTool: &tool}},
		Messages: []anthropic.MessageParam{userText("Weather in Paris?")}}
	msg, err := cl.Messages.New(ctxT(t), params)
	if err != nil {
		t.Fatalf("Messages.New: %v", err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" ||
		msg.Content[0].Name != "get_weather" || string(msg.Content[0].Input) != `{"city":"Paris"}` {
		t.Fatalf("tool message = %+v", msg)
	}
	<-seen
	params.Messages = append(params.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(msg.Content[0].ID, "18C", false)))
	if _, err := cl.Messages.New(ctxT(t), params); err != nil {
		t.Fatalf("second turn: %v", err)
	}
	var second struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			Content    any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(<-seen, &second); err != nil || len(second.Messages) != 3 ||
		second.Messages[2].Role != "tool" || second.Messages[2].ToolCallID != msg.Content[0].ID {
		t.Fatalf("second request messages = %+v (%v)", second.Messages, err)
	}
}

// A client that leaves mid-stream cancels the upstream request.
func TestAnthropicDisconnectCancelsUpstream(t *testing.T) {
	gone := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, chunk(`{"role":"assistant","content":"Hel"}`, "null"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	})
	s := tunnelStack(t, u)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	cl := anClient(t, s.Edge, "")
	stream := cl.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64,
		Messages: []anthropic.MessageParam{userText("Hi")}})
	for stream.Next() {
		if stream.Current().Type == "content_block_delta" {
			cancel()
			break
		}
	}
	select {
	case <-gone:
	case <-time.After(waitLong):
		t.Fatal("the upstream request was not cancelled after the client left")
	}
	_ = stream.Close()
}
