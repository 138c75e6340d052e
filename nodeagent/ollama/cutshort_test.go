package ollama

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TestCutShortToolCallsKeepLength: an answer that num_predict cut after a
// tool call ends with done_reason "length". The call is passed on, but the
// reason stays "length" (as OpenAI reports an answer cut short with
// calls): the answer may have been cutting a further call, and an agent
// loop must not take it as complete.
func TestCutShortToolCallsKeepLength(t *testing.T) {
	done := `{"model":"qwen3","created_at":"2025-05-27T22:54:58.219134Z","message":{"role":"assistant","content":""},"done_reason":"length","done":true,"prompt_eval_count":122,"eval_count":33}`
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineToolCall, done))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	res, _, err := runChat(t, inst, `{"messages":[{"role":"user","content":"What is the weather today in Toronto?"}],
		"tools":[{"type":"function","function":{"name":"get_current_weather","parameters":{"type":"object"}}}]}`)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.FinishReason != "length" {
		t.Errorf("finish = %q, want length", res.FinishReason)
	}
	if calls := decodeCalls(t, res); len(calls) != 1 || calls[0].Function.Name != "get_current_weather" {
		t.Fatalf("calls = %+v", calls)
	}
}
