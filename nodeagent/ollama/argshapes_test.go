package ollama

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TestToolCallArgumentShapes: OpenAI's arguments are a string holding a
// JSON object. Ollama sends an object (compacted into that string); a
// server speaking Ollama's API that sends the string form already has it
// kept as is, not encoded a second time; null or absent arguments (a tool
// without parameters) are "{}", which every SDK can parse.
func TestToolCallArgumentShapes(t *testing.T) {
	for name, tc := range map[string]struct{ args, want string }{
		"object": {`{"location": "Toronto"}`, `{"location":"Toronto"}`},
		"string": {`"{\"location\": \"Toronto\"}"`, `{"location": "Toronto"}`},
		"null":   {`null`, `{}`},
	} {
		t.Run(name, func(t *testing.T) {
			line := `{"model":"qwen3","created_at":"2025-05-27T22:54:58.100509Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_current_weather","arguments":` + tc.args + `}}]},"done":false}`
			f := newFake(t)
			f.handle("/api/chat", ndjson(line, chatLineToolDone))
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			res, _, err := runChat(t, inst, `{"messages":[{"role":"user","content":"weather?"}],
				"tools":[{"type":"function","function":{"name":"get_current_weather","parameters":{"type":"object"}}}]}`)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			calls := decodeCalls(t, res)
			if len(calls) != 1 || calls[0].Function.Arguments != tc.want {
				t.Fatalf("calls %+v, want arguments %s", calls, tc.want)
			}
		})
	}
}

// TestNonObjectLineIsUpstreamError: every NDJSON line of Ollama's stream
// is an object; a line that is JSON but not one (null, a number) is a
// broken stream, reported as an upstream error rather than skipped.
func TestNonObjectLineIsUpstreamError(t *testing.T) {
	for _, bad := range []string{"null", "42", `"x"`} {
		f := newFake(t)
		f.handle("/api/chat", ndjson(chatLineThe, bad, chatLineFinal))
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
		if _, _, err := runChat(t, inst, simpleChat); err == nil {
			t.Errorf("line %s: run succeeded", bad)
		}
	}
}

// TestRequestMappingEdges: max_tokens 1 is a limit like any other (sent
// as num_predict), and a tool result without a name is paired with the
// latest call of its id when a conversation reuses ids across turns (as
// clients numbering calls per turn do).
func TestRequestMappingEdges(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	input := `{"messages":[
		{"role":"user","content":"a"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"0","type":"function","function":{"name":"first","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"0","content":"r1"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"0","type":"function","function":{"name":"second","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"0","content":"r2"}],
		"max_tokens":1}`
	if _, _, err := runChat(t, inst, input); err != nil {
		t.Fatalf("Run: %v", err)
	}
	body := decodeBody(t, f.request(t).body)
	opts, _ := body["options"].(map[string]any)
	if opts["num_predict"] != float64(1) {
		t.Errorf("options %v, want num_predict 1", body["options"])
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) != 5 {
		t.Fatalf("messages %v", body["messages"])
	}
	if m1, m2 := msgs[2].(map[string]any), msgs[4].(map[string]any); m1["tool_name"] != "first" || m2["tool_name"] != "second" {
		t.Errorf("tool results named %v and %v, want first and second", m1["tool_name"], m2["tool_name"])
	}
}
