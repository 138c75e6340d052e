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
