package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// A prefill of only white space (or ending in it) is Anthropic's 400
// invalid_request_error and reaches no backend: vLLM's continuation of it
// would find no text to continue and generate after the closed turn.
func TestMessagesPrefillTrailingWhitespaceRefused(t *testing.T) {
	u := newUpstream(t, vllmPrefill)
	s := tunnelStack(t, u)
	for _, prefill := range []string{`"  "`, `"{\"\n"`} {
		r := post(t, s.Edge, "/v1/messages", `{"model":"qwen-7b","max_tokens":64,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":`+prefill+`}]}`)
		var env struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal(r.Body, &env); err != nil || r.Status != http.StatusBadRequest || env.Type != "error" ||
			env.Error.Type != "invalid_request_error" || env.Error.Message != "messages: final assistant content cannot end with trailing whitespace" {
			t.Errorf("%s: %d %s", prefill, r.Status, r.Body)
		}
	}
	if n := len(u.requests()); n != 0 {
		t.Fatalf("the upstream got %d requests", n)
	}
}
