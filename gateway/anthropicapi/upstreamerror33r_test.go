package anthropicapi

import (
	"net/http"
	"strings"
	"testing"
)

// An error document with a success status that says 401 or 403 is the
// node's provider key failing: 502 api_error with the fixed message the
// OpenAI surface gives an upstream's 401 and 403, never the upstream's own
// message, which may quote the node's key (OpenAI's "Incorrect API key
// provided: sk-…").
func TestUpstreamErrorCredentialMessageDropped(t *testing.T) {
	for _, body := range []string{
		`{"error":{"message":"Incorrect API key provided: sk-proj-abcd1234","type":"invalid_request_error","code":401}}`,
		`{"object":"error","message":"Incorrect API key provided: sk-proj-abcd1234","code":"403"}`,
	} {
		e, ok := UpstreamError([]byte(body))
		if !ok || e.Status != http.StatusBadGateway || e.Type != TypeAPI || strings.Contains(e.Message, "sk-") ||
			!strings.Contains(e.Message, "node's provider key") {
			t.Errorf("%s: %+v %v", body, e, ok)
		}
	}
}

// The status read from an error document's code is an error status: a
// code that is not 400..599 (200, 999, a float, a negative) is not taken,
// and the document is the 502 of an error that is not understood.
func TestUpstreamErrorStatusBounded(t *testing.T) {
	for _, code := range []string{`200`, `"200"`, `999`, `399`, `600`, `-400`, `400.0`, `4e2`, `"+429"`, `true`} {
		for _, body := range []string{
			`{"error":{"message":"m","code":` + code + `}}`,
			`{"object":"error","message":"m","code":` + code + `}`,
		} {
			e, ok := UpstreamError([]byte(body))
			if !ok || e.Status != http.StatusBadGateway || e.Message != "m" {
				t.Errorf("%s: %+v %v", body, e, ok)
			}
		}
	}
}

// A whole completion to a stream request with a provider's extra "error"
// member beside its choices is the completion, as RenderMessage renders it
// for a request that did not stream (UpstreamError does not take it); a
// body without choices that is an error document is that error.
func TestStreamWholeErrorBesideChoicesRendered(t *testing.T) {
	body := `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"error":{"message":"x","code":500}}`
	s, buf, _ := newTestStream(nil)
	if err := s.Whole([]byte(body)); err != nil || s.Failure() != nil || !strings.Contains(buf.String(), `"text":"hi"`) || s.StopReason() != StopEndTurn {
		t.Errorf("err %v, failure %v, stream:\n%s", err, s.Failure(), buf)
	}
	if _, err := RenderMessage([]byte(body), "m", nil, 1, false); err != nil {
		t.Errorf("RenderMessage: %v", err)
	}
	s, _, _ = newTestStream(nil)
	if err := s.Whole([]byte(`{"error":{"message":"busy","code":503}}`)); err != nil || s.Failure() == nil || s.Failure().Status != http.StatusServiceUnavailable {
		t.Errorf("error document: err %v, failure %+v", err, s.Failure())
	}
}
