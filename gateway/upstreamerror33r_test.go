package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// A whole completion with a provider's extra "error" member beside its
// choices reaches a Messages client as the completion, streamed or not:
// only an error document without choices is the upstream's error.
func TestMessagesWholeErrorBesideChoicesRendered(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"error":{"message":"x","code":500}}`)
	})
	s := tunnelStack(t, u)
	for _, stream := range []string{"false", "true"} {
		r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":8,"stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
		body := string(r.Body)
		if r.Status != http.StatusOK || !strings.Contains(body, `"hi"`) || strings.Contains(body, `"error"`) {
			t.Errorf("stream %s: %d %s", stream, r.Status, body)
		}
	}
}
