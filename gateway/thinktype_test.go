package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// An unknown thinking.type is refused before the request reaches a
// provider, as Anthropic's API refuses it: 400 invalid_request_error in
// Anthropic's envelope, naming the field, on /v1/messages (streamed or
// not) and count_tokens, as is a thinking object without a type. Taken as
// no thinking, a misspelt "disabled" would leave the model thinking. Every
// type of the current API is accepted.
func TestMessagesUnknownThinkingTypeRefused(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	s := tunnelStack(t, u)
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		for _, thinking := range []string{`{"type":"disable"}`, `{"type":"off"}`, `{"type":""}`, `{"type":"Enabled","budget_tokens":1024}`,
			`{"budget_tokens":1024}`} {
			for _, stream := range []string{"false", "true"} {
				r := post(t, s.Edge, path, `{"model":"qwen-7b","max_tokens":8,"stream":`+stream+`,"thinking":`+thinking+`,`+msgs+`}`)
				var env struct {
					Type  string `json:"type"`
					Error struct {
						Type    string `json:"type"`
						Message string `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal(r.Body, &env); err != nil || r.Status != http.StatusBadRequest || env.Type != "error" ||
					env.Error.Type != "invalid_request_error" || !strings.Contains(env.Error.Message, "thinking.type") ||
					r.Header.Get("request-id") == "" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
					t.Errorf("%s %s stream %s: %d %s %v", path, thinking, stream, r.Status, r.Body, r.Header)
				}
			}
		}
	}
	if n := len(u.requests()); n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
	for _, thinking := range []string{`{"type":"enabled","budget_tokens":1024}`, `{"type":"adaptive"}`, `{"type":"between_tools"}`,
		`{"type":"disabled"}`, `null`} {
		r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":2048,"thinking":`+thinking+`,`+msgs+`}`)
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"type":"message"`) {
			t.Errorf("%s: %d %s", thinking, r.Status, r.Body)
		}
	}
}
