package anthropicapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// An upstream that says tool_calls (or function_call) but delivers no call
// is answered end_turn: stop_reason tool_use promises tool_use blocks, and
// an agent loop told to run tools finds none to run (Anthropic never sends
// one without the other).
func TestToolCallsFinishWithoutCallsIsEndTurn(t *testing.T) {
	for _, finish := range []string{"tool_calls", "function_call"} {
		body := `{"choices":[{"index":0,"message":{"content":"done"},"finish_reason":"` + finish + `"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
		out, err := RenderMessage([]byte(body), "m", nil, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		var resp struct {
			StopReason string `json:"stop_reason"`
		}
		if err := json.Unmarshal(out, &resp); err != nil || resp.StopReason != StopEndTurn {
			t.Errorf("%s: whole answer %s, want stop_reason end_turn", finish, out)
		}

		s, buf, _ := newTestStream(nil)
		feed(t, s, `{"choices":[{"index":0,"delta":{"content":"done"},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"`+finish+`"}]}`, `[DONE]`)
		if s.StopReason() != StopEndTurn || !strings.Contains(buf.String(), `"stop_reason":"end_turn"`) {
			t.Errorf("%s: stream stop reason %q, want end_turn:\n%s", finish, s.StopReason(), buf)
		}
	}
}
