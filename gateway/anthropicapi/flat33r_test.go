package anthropicapi

import (
	"net/http"
	"testing"
)

// Old vLLM's flat error ({"object":"error",…}) is read as the envelope is:
// its code and type give the status when it carries no numeric code.
func TestFlatErrorCodeAndType(t *testing.T) {
	for body, want := range map[string]int{
		`{"object":"error","message":"m","type":"rate_limit_error"}`: http.StatusTooManyRequests,
		`{"object":"error","message":"m","code":"queue_full"}`:       http.StatusTooManyRequests,
		`{"object":"error","message":"m","code":"queue_timeout"}`:    http.StatusServiceUnavailable,
		`{"object":"error","message":"m","code":"invalid_request"}`:  http.StatusBadRequest,
	} {
		if e := FromOpenAIError(0, []byte(body)); e.Status != want || e.Message != "m" {
			t.Errorf("%s: %+v, want %d", body, e, want)
		}
	}
}

// An upstream message loses its control characters: escape sequences and
// NULs are dropped, line breaks and tabs become spaces.
func TestUpstreamMessageControlsDropped(t *testing.T) {
	e := FromOpenAIError(400, []byte(`{"error":{"message":"a\u001b[31mb\u0000c\u0085d\re"}}`))
	if e.Message != "a[31mbcd e" {
		t.Errorf("message %q", e.Message)
	}
}

// An error document with "choices": null is still an error document.
func TestUpstreamErrorChoicesNull(t *testing.T) {
	e, ok := UpstreamError([]byte(`{"error":{"message":"busy","code":503},"choices":null}`))
	if !ok || e.Status != http.StatusServiceUnavailable || e.Message != "busy" {
		t.Errorf("%+v %v", e, ok)
	}
}
