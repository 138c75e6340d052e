package openaiapi

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TestNativeToolCallsDropBlankContent: a model that writes only whitespace
// before its native tool calls (Qwen's "\n\n") answers with content null
// as a whole answer, and the stream of the same run sends no content
// either, so an SDK's accumulated message is the same both ways.
func TestNativeToolCallsDropBlankContent(t *testing.T) {
	calls := `[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]`
	events := []*iop.RunEvent{evStart(nil), evDelta("\n\n"), evDelta(" "), evComplete("tool_calls", nil, map[string]string{MetaToolCalls: calls})}
	resp, body, e := aggregate(t, RenderOptions{Model: "m", ToolNames: offered}, events...)
	if e != nil {
		t.Fatal(e)
	}
	if resp.Choices[0].Message.Content != "" || len(resp.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("whole answer %s", body)
	}
	raw, _, err := runStream(t, RenderOptions{Model: "m", ToolNames: offered}, events...)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeChatStream(t, raw)
	if r.content != "" || len(r.calls) != 1 || r.calls[0].ID != "call_1" || r.finish != "tool_calls" {
		t.Fatalf("stream content %q calls %+v finish %q:\n%s", r.content, r.calls, r.finish, raw)
	}
}

// TestNativeToolCallsWinOverTextMark: a run that carries native tool calls
// is answered with them alone, even if it is also marked as a text
// fallback (a server that returned tool_calls to the text form): a
// <tool_call> block in its content is content, verbatim, both whole and
// streamed, and is never restored as a second call.
func TestNativeToolCallsWinOverTextMark(t *testing.T) {
	calls := `[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]`
	block := `<tool_call>{"name":"lookup","arguments":{"q":"x"}}</tool_call>`
	meta := map[string]string{MetaToolCalls: calls, MetaTextToolFallback: "true"}
	events := []*iop.RunEvent{evStart(nil), evDelta("see " + block), evComplete("tool_calls", nil, meta)}
	resp, body, e := aggregate(t, RenderOptions{Model: "m", ToolNames: offered}, events...)
	if e != nil {
		t.Fatal(e)
	}
	if m := resp.Choices[0].Message; m.Content != "see "+block || len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_1" {
		t.Fatalf("whole answer %s", body)
	}
	raw, _, err := runStream(t, RenderOptions{Model: "m", ToolNames: offered}, events...)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeChatStream(t, raw)
	if r.content != "see "+block || len(r.calls) != 1 || r.calls[0].ID != "call_1" {
		t.Fatalf("stream content %q calls %+v:\n%s", r.content, r.calls, raw)
	}
}
