package ollama

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Ollama's api.Message carries tool_call_id and api.ToolCall an id, which
// its renderers use to pair a result with its call (Cohere's and Gemma 4's
// templates index results by call id); its own OpenAI layer forwards both.
// Dropping them left every result of a parallel call unpaired.
func TestToolCallIDsReachOllama(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	input := `{"messages":[
		{"role":"user","content":"weather in Paris and Rome?"},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_p","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
			{"id":"call_r","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}}]},
		{"role":"tool","tool_call_id":"call_r","content":"sunny"},
		{"role":"tool","tool_call_id":"call_p","content":"rain"}]}`
	if _, _, err := runChat(t, inst, input); err != nil {
		t.Fatalf("Run: %v", err)
	}
	body := decodeBody(t, f.request(t).body)
	wantJSON(t, "messages", body["messages"], `[
		{"role":"user","content":"weather in Paris and Rome?"},
		{"role":"assistant","content":"","tool_calls":[
			{"id":"call_p","function":{"name":"weather","arguments":{"city":"Paris"}}},
			{"id":"call_r","function":{"name":"weather","arguments":{"city":"Rome"}}}]},
		{"role":"tool","content":"sunny","tool_name":"weather","tool_call_id":"call_r"},
		{"role":"tool","content":"rain","tool_name":"weather","tool_call_id":"call_p"}]`)
}
