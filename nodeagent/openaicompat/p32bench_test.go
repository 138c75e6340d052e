package openaicompat

import (
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// BenchmarkRequestBodyToolLoop encodes a chat body of a reasoning model's
// tool loop (ten rounds of a user turn, an assistant call with its
// reasoning and the tool's result), as a vllm instance sends it.
func BenchmarkRequestBodyToolLoop(b *testing.B) {
	round := `{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":null,"reasoning":"The user wants the weather; call get_weather.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"18C, clear"},`
	in := testinput.Chat(`{"messages":[` + strings.TrimSuffix(strings.Repeat(round, 10), ",") + `],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := requestBody(in, adapter.OpChat, "Qwen/Qwen3-8B", reasoningMember); err != nil {
			b.Fatal(err)
		}
	}
}
