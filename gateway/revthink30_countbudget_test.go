package gateway_test

import (
	"net/http"
	"testing"
)

// count_tokens bounds an "enabled" budget by max_tokens when the request
// carries one, as Messages does (one request body counted, then sent): a
// budget not below it is refused with Anthropic's wording, unless the
// interleaved-thinking beta lets it cover the whole turn.
func TestCountTokensThinkingBudgetBoundByMaxTokens(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	s := tunnelStack(t, u)
	const body = `{"model":"qwen-7b","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":4096},"messages":[{"role":"user","content":"x"}]}`
	r := post(t, s.Edge, "/v1/messages/count_tokens", body)
	if msg := anthropicErrorMessage(t, r); r.Status != http.StatusBadRequest || msg != "`max_tokens` must be greater than `thinking.budget_tokens`." {
		t.Errorf("without the beta: %d %q", r.Status, msg)
	}
	r = do(t, httpClient(t), http.MethodPost, s.Edge.URL+"/v1/messages/count_tokens", body,
		map[string]string{"anthropic-beta": "token-counting-2024-11-01, interleaved-thinking-2025-05-14"})
	if r.Status != http.StatusOK {
		t.Errorf("with the beta: %d %s", r.Status, r.Body)
	}
}
