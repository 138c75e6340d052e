package anthropicapi

import (
	"net/http"
	"testing"
)

// UpstreamError takes only an error document for one: a completion (with
// or without an "error": null beside its choices), a body that is not JSON
// or not an object, and an object without an error are not errors.
func TestUpstreamErrorOnlyErrors(t *testing.T) {
	for _, body := range []string{
		`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"message":{"content":"hi"}}],"error":null}`,
		`{"choices":[{"index":0,"message":{"content":"hi"}}],"error":{"message":"x"}}`,
		`{"object":"chat.completion","choices":[]}`,
		`not json`, `[{"error":"x"}]`, `{}`, `{"error":null}`,
	} {
		if e, ok := UpstreamError([]byte(body)); ok {
			t.Errorf("%s: read as %+v", body, e)
		}
	}
	e, ok := UpstreamError([]byte(`{"object":"error","message":"tab\there","code":429}`))
	if !ok || e.Status != http.StatusTooManyRequests || e.Type != TypeRateLimit || e.Message != "tab here" {
		t.Errorf("flat envelope: %+v %v", e, ok)
	}
}
