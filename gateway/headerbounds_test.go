package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// The request headers the edge reads are taken up to their documented
// bounds and refused (or, for X-Request-Id, replaced) one past them:
// X-IOP-Deadline-Ms up to a day, X-IOP-Session-Id up to 256 bytes,
// X-Request-Id up to 128 printable ASCII characters.
func TestRequestHeaderBounds(t *testing.T) {
	s := mockStack(t, nil)
	c := httpClient(t)
	chat := `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`
	send := func(h map[string]string) response {
		t.Helper()
		return do(t, c, http.MethodPost, s.URL+"/v1/chat/completions", chat, h)
	}
	for _, h := range []map[string]string{
		{"X-IOP-Deadline-Ms": "86400000"},
		{"X-IOP-Session-Id": strings.Repeat("s", 256)},
	} {
		if r := send(h); r.Status != http.StatusOK {
			t.Errorf("%v: status %d %s, want 200", h, r.Status, r.Body)
		}
	}
	for _, h := range []map[string]string{
		{"X-IOP-Deadline-Ms": "86400001"},
		{"X-IOP-Session-Id": strings.Repeat("s", 257)},
	} {
		assertError(t, send(h), http.StatusBadRequest, "invalid_request")
	}

	kept := strings.Repeat("r", 127) + "~"
	if got := send(map[string]string{"X-Request-Id": kept}).Header.Get("X-Request-Id"); got != kept {
		t.Errorf("X-Request-Id of 128 printable characters answered as %q, want it kept", got)
	}
	long := strings.Repeat("r", 129)
	if got := send(map[string]string{"X-Request-Id": long}).Header.Get("X-Request-Id"); got == long || !strings.HasPrefix(got, "req_") {
		t.Errorf("X-Request-Id of 129 characters answered as %q, want a generated id", got)
	}
}
