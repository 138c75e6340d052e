package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// A Messages request whose only message is an empty assistant prefill is
// answered with Anthropic's 400 naming messages (the client sent one),
// not with the OpenAI layer's complaint about an empty array, and never
// reaches a node.
func TestMessagesLoneEmptyPrefillRefused(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		t.Error("a lone empty prefill reached the upstream")
	})
	s := tunnelStack(t, u)
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		r := post(t, s.Edge, path, `{"model":"qwen-7b","max_tokens":8,"messages":[{"role":"assistant","content":""}]}`)
		var env struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil {
			t.Fatalf("%s: %d %s: %v", path, r.Status, r.Body, err)
		}
		if r.Status != http.StatusBadRequest || env.Type != "error" || env.Error.Type != "invalid_request_error" ||
			!strings.HasPrefix(env.Error.Message, "messages: ") {
			t.Errorf("%s: %d %s", path, r.Status, r.Body)
		}
	}
}
