package anthropicapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// checkUpstreamError40b checks what a client may be shown of an
// upstream's error: a status in 400..599 with its own type, and a
// message that is non-empty, bounded, valid UTF-8, trimmed and free of
// control characters (which would drive a terminal showing it), in an
// envelope that is valid JSON carrying that message.
func checkUpstreamError40b(t *testing.T, e *Error, from []byte) {
	t.Helper()
	if e == nil || e.Status < 400 || e.Status > 599 || e.Type != TypeForStatus(e.Status) {
		t.Fatalf("error %+v from %q", e, from)
	}
	m := e.Message
	if m == "" || len(m) > maxUpstreamMessage+len("…") || !utf8.ValidString(m) || strings.TrimSpace(m) != m ||
		strings.IndexFunc(m, unicode.IsControl) >= 0 {
		t.Fatalf("message %q from %q", m, from)
	}
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(e.Envelope("req_1"), &env); err != nil || env.Type != "error" || env.Error.Type != e.Type || env.Error.Message != m {
		t.Fatalf("envelope %s of %+v: %v", e.Envelope("req_1"), e, err)
	}
}

// FuzzUpstreamError40b: an upstream's error body (a whole answer's, or an
// error event in its stream) is hostile or broken input. Whatever it is:
//   - FromOpenAIError gives a well-formed error (checkUpstreamError40b),
//     with the status given when that is an error status, and a fixed
//     message when the body is not JSON (no raw upstream bytes reach the
//     client);
//   - UpstreamError takes only a JSON error document without a choice,
//     and never answers 401 or 403 (the node's provider key failed, not
//     the client's).
func FuzzUpstreamError40b(f *testing.F) {
	for _, s := range []string{
		`{"error":{"message":"\"auto\" tool choice requires --enable-auto-tool-choice","type":"BadRequestError","param":null,"code":400}}`,
		`{"object":"error","message":"The model does not exist.","type":"NotFoundError","param":null,"code":404}`,
		`{"error":{"message":"Incorrect API key provided: sk-abc***","type":"invalid_request_error","code":"invalid_api_key"}}`,
		`{"error":{"message":"line\nbreak\u001b[31mred\u0085\u0000","code":"429"}}`,
		`{"choices":[],"error":{"message":"upstream failed","code":502}}`,
		`{"choices":[{"index":0}],"error":{"message":"beside a choice"}}`,
		`{"error":"a string","detail":"FastAPI"}`,
		`<html><body>502 Bad Gateway</body></html>`,
		`{"error":{"message":"` + strings.Repeat("é", 700) + `"}}`,
	} {
		f.Add([]byte(s), uint16(0))
		f.Add([]byte(s), uint16(401))
	}
	f.Fuzz(func(t *testing.T, body []byte, status uint16) {
		e := FromOpenAIError(int(status), body)
		checkUpstreamError40b(t, e, body)
		if status >= 400 && status <= 599 && e.Status != int(status) {
			t.Fatalf("status %d became %d", status, e.Status)
		}
		if !json.Valid(body) && e.Message != fixedMessage(e.Status) {
			t.Fatalf("message %q taken from a body that is not JSON: %q", e.Message, body)
		}
		ue, ok := UpstreamError(body)
		if !ok {
			if ue != nil {
				t.Fatalf("not an error document, yet %+v", ue)
			}
			return
		}
		checkUpstreamError40b(t, ue, body)
		if !json.Valid(body) {
			t.Fatalf("taken for an error document: %q", body)
		}
		var doc struct {
			Choices json.RawMessage `json:"choices"`
		}
		if json.Unmarshal(body, &doc) != nil || hasChoices(doc.Choices) {
			t.Fatalf("an answer with a choice taken for an error: %q", body)
		}
		if ue.Status == http.StatusUnauthorized || ue.Status == http.StatusForbidden {
			t.Fatalf("upstream %d passed on: %q", ue.Status, body)
		}
	})
}
