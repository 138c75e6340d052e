package openaicompat

import (
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// TestCutShortToolCallsKeepLength: a stream cut by max_tokens while it wrote
// a tool call ends with finish_reason "length" (vLLM, OpenAI). The call is
// passed on, but the reason stays "length": reported as "tool_calls", an
// agent loop would run a call whose arguments were cut. A plain "stop" with
// calls (some servers) becomes "tool_calls", as OpenAI says it.
func TestCutShortToolCallsKeepLength(t *testing.T) {
	for provider, want := range map[string]string{"length": "length", "content_filter": "content_filter", "stop": "tool_calls", "tool_calls": "tool_calls"} {
		t.Run(provider, func(t *testing.T) {
			res, _, err := runOnce(t, adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				sseWrite(t, w, vllmChunk(`{"role":"assistant","content":""}`, ""))
				sseWrite(t, w, vllmChunk(`{"tool_calls":[{"id":"chatcmpl-tool-1","type":"function","index":0,"function":{"name":"get_weather","arguments":""}}]}`, ""))
				sseWrite(t, w, vllmChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Par"}}]}`, ""))
				sseWrite(t, w, vllmChunk(`{"content":""}`, provider))
				sseWrite(t, w, vllmUsageChunk(10, 8))
				sseWrite(t, w, vllmDone)
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.FinishReason != want {
				t.Errorf("finish_reason %q, want %q", res.FinishReason, want)
			}
			got := resultCalls(t, res)
			if len(got) != 1 || got[0].Function.Name != "get_weather" || got[0].Function.Arguments != `{"city": "Par` || got[0].ID != "chatcmpl-tool-1" {
				t.Fatalf("calls %+v", got)
			}
		})
	}
}
