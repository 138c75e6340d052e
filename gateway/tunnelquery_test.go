package gateway_test

import (
	"net/http"
	"testing"
)

// The client's query string reaches the upstream with the tunnelled
// request (some OpenAI-compatible servers take options there).
func TestTunnelKeepsQueryString(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "api-version=2024-06-01" {
			writeJSON(w, http.StatusBadRequest, `{"error":{"message":"query `+r.URL.RawQuery+`","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	s := tunnelStack(t, u)
	r := post(t, s.Edge, "/v1/chat/completions?api-version=2024-06-01", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusOK || string(r.Body) != vllmChatJSON {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
}
