package anthropicapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// sdkServer is an edge stand-in: it parses the Messages request, checks the
// OpenAI body it translates to, and answers with the translation of a canned
// OpenAI answer chosen by the last user text ("tool", "overloaded", else
// text). Handler failures are reported through the response, which the
// test's SDK call then surfaces.
func sdkServer(t *testing.T) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		body, err := io.ReadAll(hr.Body)
		if err != nil {
			return
		}
		r, e := ParseRequest(body)
		if e != nil {
			WriteError(w, "req_parse", e)
			return
		}
		if r.Model == "missing" {
			WriteError(w, "req_404", NewError(http.StatusNotFound, "model 'missing' not found"))
			return
		}
		chat, err := r.OpenAIChat()
		if err != nil {
			WriteError(w, "", NewError(500, err.Error()))
			return
		}
		var oa struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Tools  []json.RawMessage `json:"tools"`
			Stream bool              `json:"stream"`
		}
		if err := json.Unmarshal(chat, &oa); err != nil || oa.Stream != r.Stream || len(oa.Tools) != 1 {
			WriteError(w, "", NewError(400, "unexpected chat body: "+string(chat)))
			return
		}
		var last string
		_ = json.Unmarshal(oa.Messages[len(oa.Messages)-1].Content, &last)

		if !r.Stream {
			answer := `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":2}}`
			if last == "tool" {
				answer = `{"choices":[{"index":0,"message":{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"call_9","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":11,"completion_tokens":8}}`
			}
			out, err := RenderMessage([]byte(answer), r.Model, r.StopSequences, CountTokens(r), false)
			if err != nil {
				WriteError(w, "", NewError(502, err.Error()))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		s := NewStreamWriter(w, fl.Flush, r.Model, CountTokens(r), r.StopSequences, false)
		chunks := []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"Hi "}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"there"}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		}
		switch last {
		case "tool":
			chunks = []string{
				`{"choices":[{"index":0,"delta":{"content":"Let me look."}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Paris\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			}
		case "overloaded":
			chunks = chunks[:2]
		}
		chunks = append(chunks, `{"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":8}}`)
		_ = s.Ping()
		for _, c := range chunks {
			if err := s.Chunk([]byte(c)); err != nil {
				_ = s.Fail(NewError(502, "bad upstream"))
				return
			}
		}
		if last == "overloaded" {
			_ = s.Fail(NewError(529, "Overloaded"))
			return
		}
		_ = s.Finish()
	}))
}

func sdkParams(userText string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-x",
		MaxTokens: 64,
		System:    []anthropic.TextBlockParam{{Text: "be brief"}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("earlier")),
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{"city": "Oslo"}, "get_weather")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "3C", false), anthropic.NewTextBlock(userText)),
		},
		Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}},
		}, "get_weather")},
	}
}

func sdkClient(url string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(url), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
}

func TestSDKMessagesNew(t *testing.T) {
	srv := sdkServer(t)
	defer srv.Close()
	client := sdkClient(srv.URL)
	ctx := context.Background()

	msg, err := client.Messages.New(ctx, sdkParams("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != "Hi there" ||
		msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.InputTokens != 11 || msg.Usage.OutputTokens != 2 ||
		msg.Model != "claude-x" || !strings.HasPrefix(msg.ID, "msg_") {
		t.Fatalf("%s", msg.RawJSON())
	}

	msg, err = client.Messages.New(ctx, sdkParams("tool"))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Text != "Let me look." || msg.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("%s", msg.RawJSON())
	}
	tu := msg.Content[1].AsToolUse()
	if tu.ID != "call_9" || tu.Name != "get_weather" || string(tu.Input) != `{"city":"Paris"}` {
		t.Fatalf("tool_use %+v", tu)
	}

	p := sdkParams("hello")
	p.Model = "missing"
	_, err = client.Messages.New(ctx, p)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Type() != "not_found_error" ||
		apiErr.RequestID != "req_404" || apiErr.Message != "model 'missing' not found" {
		t.Fatalf("error %v", err)
	}
}

func TestSDKMessagesNewStreaming(t *testing.T) {
	srv := sdkServer(t)
	defer srv.Close()
	client := sdkClient(srv.URL)
	ctx := context.Background()

	for _, c := range []struct {
		user   string
		blocks int
		reason anthropic.StopReason
	}{{"hello", 1, anthropic.StopReasonEndTurn}, {"tool", 2, anthropic.StopReasonToolUse}} {
		stream := client.Messages.NewStreaming(ctx, sdkParams(c.user))
		msg := anthropic.Message{}
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		if len(msg.Content) != c.blocks || msg.StopReason != c.reason || msg.Usage.OutputTokens != 8 || msg.Usage.InputTokens != 11 {
			t.Fatalf("%s: %s", c.user, msg.RawJSON())
		}
		if c.user == "hello" && msg.Content[0].Text != "Hi there" {
			t.Fatalf("text %q", msg.Content[0].Text)
		}
		if c.user == "tool" {
			tu := msg.Content[1].AsToolUse()
			if msg.Content[0].Text != "Let me look." || tu.ID != "call_9" || tu.Name != "get_weather" || string(tu.Input) != `{"city":"Paris"}` {
				t.Fatalf("%s", msg.RawJSON())
			}
		}
	}

	stream := client.Messages.NewStreaming(ctx, sdkParams("overloaded"))
	msg := anthropic.Message{}
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	stream.Close()
	var apiErr *anthropic.Error
	if err := stream.Err(); !errors.As(err, &apiErr) || apiErr.Type() != "overloaded_error" || apiErr.Message != "Overloaded" {
		t.Fatalf("stream error %v", err)
	}
	if msg.Content[0].Text != "Hi " || msg.StopReason != "" {
		t.Fatalf("partial message %s", msg.RawJSON())
	}
}
