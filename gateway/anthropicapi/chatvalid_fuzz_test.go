package anthropicapi

import (
	"testing"

	"github.com/iop-gateway/iop/gateway/openaiapi"
)

// Every request ParseRequest accepts converts to a chat body the OpenAI
// pipeline accepts too: otherwise the client would see an error about
// fields it never sent (OpenAI's names), for a request Anthropic's own
// rules allow.
func FuzzConvertedChatIsValid(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],
		"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true},"stream":true,"stop_sequences":["x"],"temperature":0.2,"top_k":3,"metadata":{"user_id":"u"},
		"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"q":1}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":[{"type":"text","text":"e"},{"type":"image","source":{"type":"url","url":"https://x"}}]}]}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"x"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, e := ParseRequest(body)
		if e != nil {
			return
		}
		out, err := r.OpenAIChat()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := openaiapi.ParseChat(out); err != nil {
			t.Fatalf("%s -> %s: %v", body, out, err)
		}
	})
}
