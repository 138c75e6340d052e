package ollama

import (
	"context"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An agent sends the assistant turn back with the reasoning it produced:
// each assistant message's reasoning goes to Ollama as that message's
// thinking (api.Message.Thinking), beside its content and tool calls, as
// Ollama's own OpenAI layer maps "reasoning"; messages without reasoning
// carry no thinking member at all.
func TestHistoryReasoningSentAsThinking(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineThink1, chatLineAnswer, chatLineThinkDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	const body = `{"messages":[` +
		`{"role":"user","content":"weather in Paris?"},` +
		`{"role":"assistant","content":null,"reasoning":"The user wants weather. Call the tool.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"18C"},` +
		`{"role":"assistant","content":"It is 18C.","reasoning_content":"Report it."},` +
		`{"role":"assistant","content":"Anything else?"},` +
		`{"role":"user","content":"thanks"}]}`
	sink := &reasonSink{}
	if _, err := inst.Run(context.Background(), &iop.RunRequest{
		Operation: adapter.OpChat, Target: "qwen3", Input: testinput.Chat(body),
	}, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := decodeBody(t, f.request(t).body)
	wantJSON(t, "messages", got["messages"], `[
		{"role":"user","content":"weather in Paris?"},
		{"role":"assistant","content":"","thinking":"The user wants weather. Call the tool.",
		 "tool_calls":[{"id":"call_1","function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},
		{"role":"tool","content":"18C","tool_name":"get_weather","tool_call_id":"call_1"},
		{"role":"assistant","content":"It is 18C.","thinking":"Report it."},
		{"role":"assistant","content":"Anything else?"},
		{"role":"user","content":"thanks"}]`)
}

// Reasoning is an assistant's: on any other message the adapter sends no
// thinking, whatever the input carries (Ollama's templates render thinking
// for assistant turns only, so it would be dropped or, worse, misplaced).
func TestReasoningOnOtherRolesNotSent(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineThe, chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	text := func(s string) []*iop.ContentPart {
		return []*iop.ContentPart{{Part: &iop.ContentPart_Text{Text: s}}}
	}
	in := &iop.RunInput{Messages: []*iop.ChatMessage{
		{Role: iop.ChatRole_CHAT_ROLE_SYSTEM, Content: text("be brief"), Reasoning: "s"},
		{Role: iop.ChatRole_CHAT_ROLE_USER, Content: text("hi"), Reasoning: "u"},
		{Role: iop.ChatRole_CHAT_ROLE_ASSISTANT, Content: text("hello"), Reasoning: "greet back"},
		{Role: iop.ChatRole_CHAT_ROLE_TOOL, Content: text("r"), ToolCallId: "c", Name: "f", Reasoning: "t"},
	}}
	if _, err := inst.Run(context.Background(), &iop.RunRequest{Operation: adapter.OpChat, Target: "llama3.2", Input: in}, newSink()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantJSON(t, "messages", decodeBody(t, f.request(t).body)["messages"], `[
		{"role":"system","content":"be brief"},
		{"role":"user","content":"hi"},
		{"role":"assistant","content":"hello","thinking":"greet back"},
		{"role":"tool","content":"r","tool_name":"f","tool_call_id":"c"}]`)
}
