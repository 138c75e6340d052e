package openaiapi

import (
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TestHoldPastItsBoundKeepsLaterWhitespace: once the hold outgrew
// MaxAnswerBytes and was released as text, the content is real text: white
// space after it is content, as parseTextToolCalls keeps it beside a
// restored call, and must not be held as if the answer might still turn
// out to be only tool calls (which would drop it when a call follows).
func TestHoldPastItsBoundKeepsLaterWhitespace(t *testing.T) {
	open := `<tool_call>{"name":"lookup","arguments":{"q":"`
	big := open + strings.Repeat("b", MaxAnswerBytes)
	call := `<tool_call>{"name":"lookup","arguments":{"q":"x"}}</tool_call>`
	raw, _, err := runStream(t, RenderOptions{ToolNames: offered},
		evStart(fallbackMeta), evDelta(big), evDelta("\n"), evDelta(call), evComplete("stop", nil, fallbackMeta))
	if err != nil {
		t.Fatal(err)
	}
	got := decodeChatStream(t, raw)
	if got.content != big+"\n" {
		t.Errorf("content ends %q, want %q", got.content[max(0, len(got.content)-8):], "bbbbbbb\n")
	}
	if len(got.calls) != 1 || got.calls[0].Function.Arguments != `{"q":"x"}` {
		t.Errorf("calls %+v", got.calls)
	}
}

// TestNativeCallsKeepWhitespaceBeforeHeldBlock: an answer with native
// tool calls whose content is leading white space and then a text block
// (held: the run was not marked) has content that is not blank, so the
// whole answer keeps that white space, and so must the stream: dropBlank
// may drop held white space only when it is all the content.
func TestNativeCallsKeepWhitespaceBeforeHeldBlock(t *testing.T) {
	calls := `[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]`
	block := `<tool_call>{"name":"lookup","arguments":{"q":"x"}}</tool_call>`
	events := []*iop.RunEvent{evStart(nil), evDelta("\n"), evDelta(block), evComplete("tool_calls", nil, map[string]string{MetaToolCalls: calls})}
	opts := RenderOptions{Model: "m", ToolNames: offered}
	whole, stream := renderNonStream(t, opts, events), renderStream(t, opts, events)
	if whole.content != "\n"+block || !equalRendered(whole, stream) {
		t.Fatalf("whole %+v\nstream %+v", whole, stream)
	}
}
