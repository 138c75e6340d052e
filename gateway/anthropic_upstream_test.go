package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/iop-gateway/iop/config"
)

// An OpenAI-compatible upstream may end its SSE lines with CRLF (or a lone
// CR), as the SSE grammar allows; the Messages stream converted from it is
// the same as from an LF stream.
func TestAnthropicStreamFromCRLFUpstream(t *testing.T) {
	for name, eol := range map[string]string{"CRLF": "\r\n", "CR": "\r"} {
		u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			events := contentStream("Hello", " world")
			for i, ev := range events {
				events[i] = strings.ReplaceAll(ev, "\n", eol)
			}
			writeSSE(w, events...)
		})
		s := tunnelStack(t, u)
		cl := anClient(t, s.Edge, "")
		stream := cl.Messages.NewStreaming(ctxT(t), anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64,
			Messages: []anthropic.MessageParam{userText("Hi")}})
		acc := accumulate(t, stream)
		if len(acc.Content) != 1 || acc.Content[0].Text != "Hello world" || acc.StopReason != anthropic.StopReasonEndTurn {
			t.Errorf("%s: streamed message = %+v", name, acc)
		}
	}
}

// An upstream that ignores "stream": true and answers one chat.completion
// still gives the Messages client the stream it asked for: text, then a
// tool call, with the upstream's stop reason and usage.
func TestAnthropicStreamFromWholeAnswer(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"id":"chatcmpl-1","object":"chat.completion","created":1727000000,"model":"m",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Let me check.","tool_calls":[`+
			`{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},`+
			`{"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lyon\"}"}}]},`+
			`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29}}`)
	})
	// native: tools go through the tunnel (auto would run them, and the
	// node's run path has its own handling of such servers).
	s := tunnelStack(t, u, func(c *config.Edge) { c.Nodes[0].Providers[0].ToolMode = "native" })
	cl := anClient(t, s.Edge, "")
	tool := anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}
	stream := cl.Messages.NewStreaming(ctxT(t), anthropic.MessageNewParams{Model: "qwen-7b", MaxTokens: 64,
		Tools: []anthropic.ToolUnionParam{{OfTool: &tool}}, Messages: []anthropic.MessageParam{userText("Weather?")}})
	acc := accumulate(t, stream)
	if len(acc.Content) != 3 || acc.Content[0].Text != "Let me check." ||
		acc.Content[1].Name != "get_weather" || string(acc.Content[1].Input) != `{"city":"Paris"}` ||
		acc.Content[2].Name != "get_weather" || string(acc.Content[2].Input) != `{"city":"Lyon"}` ||
		acc.StopReason != anthropic.StopReasonToolUse || acc.Usage.OutputTokens != 9 {
		t.Fatalf("streamed message = %+v", acc)
	}
}

// accumulate reads a Messages stream to its end into one message.
func accumulate(t *testing.T, stream *ssestream.Stream[anthropic.MessageStreamEventUnion]) anthropic.Message {
	t.Helper()
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return acc
}
