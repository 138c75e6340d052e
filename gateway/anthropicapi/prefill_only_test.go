package anthropicapi

import (
	"net/http"
	"strings"
	"testing"
)

// A conversation whose only message is an assistant turn with nothing to
// send on (an empty prefill, empty text, thinking alone) has no message to
// convert: it is refused here, naming messages, rather than becoming a chat
// body with no messages that the OpenAI layer refuses in its own words.
// With a system prompt there is a conversation to send, and with text or a
// tool call the prefill is a message.
func TestLoneEmptyPrefillRefused(t *testing.T) {
	for _, msg := range []string{
		`{"role":"assistant","content":""}`,
		`{"role":"assistant","content":[]}`,
		`{"role":"assistant","content":[{"type":"text","text":""}]}`,
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm","signature":"s"}]}`,
		`{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"},{"type":"text","text":""}]}`,
	} {
		for _, parse := range []func([]byte) (*Request, *Error){ParseRequest, ParseCountRequest} {
			r, e := parse([]byte(`{"model":"m","max_tokens":5,"messages":[` + msg + `]}`))
			if e == nil {
				chat, _ := r.OpenAIChat()
				t.Errorf("%s: accepted, converted to %s", msg, chat)
				continue
			}
			if e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" || !strings.HasPrefix(e.Message, "messages: ") {
				t.Errorf("%s: %d %s %q", msg, e.Status, e.Type, e.Message)
			}
		}
	}
	for _, body := range []string{
		`{"model":"m","max_tokens":5,"system":"Be brief.","messages":[{"role":"assistant","content":""}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":"Sure"}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":""}]}`,
	} {
		if _, e := ParseRequest([]byte(body)); e != nil {
			t.Errorf("%s: %v", body, e)
		}
	}
}
