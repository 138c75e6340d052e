package openaiapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func evStart(meta map[string]string) *iop.RunEvent {
	return &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START, Metadata: meta}
}

func evDelta(s string) *iop.RunEvent {
	return &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: s}
}

func evComplete(finish string, u *iop.Usage, meta map[string]string) *iop.RunEvent {
	return &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: finish, Usage: u, Metadata: meta}
}

// evError builds an ERROR event; code is the error code's lowercase name
// (upstream, invalid_request, ...; "upstream_error" reads as upstream).
func evError(code, msg string, status int32) *iop.RunEvent {
	if code == "upstream_error" {
		code = "upstream"
	}
	c := iop.ErrorCode(iop.ErrorCode_value["ERROR_CODE_"+strings.ToUpper(code)])
	return &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_ERROR, Error: &iop.RunError{Code: c, Message: msg, HttpStatus: status}}
}

func evCancelled() *iop.RunEvent {
	return &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_CANCELLED}
}

var fallbackMeta = map[string]string{MetaTextToolFallback: "true"}

// sseData splits a recorded SSE body into its data payloads and checks that
// it is made only of `data: …\n\n` events.
func sseData(t testing.TB, raw string) []string {
	t.Helper()
	if raw == "" {
		return nil
	}
	if !strings.HasSuffix(raw, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", raw)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(raw, "\n\n"), "\n\n") {
		if !strings.HasPrefix(ev, "data: ") || strings.Contains(ev, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		out = append(out, strings.TrimPrefix(ev, "data: "))
	}
	return out
}

// streamResult is a decoded chat stream.
type streamResult struct {
	chunks  []openai.ChatCompletionStreamResponse
	content string
	calls   []openai.ToolCall
	finish  string
	done    bool
	errBody string // the error event's payload, if any
	usage   *openai.Usage
}

// decodeChatStream decodes a recorded stream with go-openai's chunk type and
// accumulates it the way SDK users do (tool calls keyed by index).
func decodeChatStream(t testing.TB, raw string) streamResult {
	t.Helper()
	var r streamResult
	events := sseData(t, raw)
	for i, d := range events {
		if d == "[DONE]" {
			if i != len(events)-1 {
				t.Fatal("[DONE] is not last")
			}
			r.done = true
			continue
		}
		if strings.HasPrefix(d, `{"error":`) {
			if i != len(events)-1 {
				t.Fatal("error event is not last")
			}
			r.errBody = d
			continue
		}
		var c openai.ChatCompletionStreamResponse
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		if c.Object != "chat.completion.chunk" {
			t.Fatalf("object %q", c.Object)
		}
		r.chunks = append(r.chunks, c)
		if c.Usage != nil {
			r.usage = c.Usage
		}
		for _, ch := range c.Choices {
			r.content += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				idx := *tc.Index
				for len(r.calls) <= idx {
					r.calls = append(r.calls, openai.ToolCall{})
				}
				acc := &r.calls[idx]
				if tc.ID != "" {
					acc.ID = tc.ID
				}
				if tc.Type != "" {
					acc.Type = tc.Type
				}
				acc.Function.Name += tc.Function.Name
				acc.Function.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != "" {
				r.finish = string(ch.FinishReason)
			}
		}
	}
	for i := 1; i < len(r.chunks); i++ {
		if r.chunks[i].ID != r.chunks[0].ID || r.chunks[i].Created != r.chunks[0].Created || r.chunks[i].Model != r.chunks[0].Model {
			t.Fatal("id/created/model differ across chunks")
		}
	}
	return r
}

// runStream feeds events to a ChatStreamWriter and returns the recording.
func runStream(t testing.TB, opts RenderOptions, events ...*iop.RunEvent) (string, *ChatStreamWriter, error) {
	t.Helper()
	var buf bytes.Buffer
	w := NewChatStreamWriter(&buf, nil, opts)
	var last error
	for _, ev := range events {
		if err := w.Add(ev); err != nil {
			last = err
		}
	}
	return buf.String(), w, last
}

// aggregate renders events with a ChatAggregator and decodes the result
// with go-openai's response type.
func aggregate(t testing.TB, opts RenderOptions, events ...*iop.RunEvent) (openai.ChatCompletionResponse, []byte, *Error) {
	t.Helper()
	a := NewChatAggregator(opts)
	for _, ev := range events {
		a.Add(ev)
	}
	body, e := a.Result()
	var resp openai.ChatCompletionResponse
	if e == nil {
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
	}
	return resp, body, e
}

// sdkClient returns a go-openai client whose every request is answered with
// status and body (SSE when the body starts with "data:").
func sdkClient(t *testing.T, status int, body string) *openai.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(body, "data:") {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	cfg := openai.DefaultConfig("test")
	cfg.BaseURL = srv.URL + "/v1"
	return openai.NewClientWithConfig(cfg)
}

// sdkStreamAll reads a whole chat stream through the SDK.
func sdkStreamAll(t *testing.T, raw string) ([]openai.ChatCompletionStreamResponse, error) {
	t.Helper()
	c := sdkClient(t, 200, raw)
	st, err := c.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
	})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var out []openai.ChatCompletionStreamResponse
	for {
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
}

// scanTopLevel validates body, then scans it as scanValidTopLevel does.
func scanTopLevel(body []byte) (open int, members []member, err error) {
	if !json.Valid(body) {
		return 0, nil, ErrNotJSONObject
	}
	return scanValidTopLevel(body, nil)
}
