package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// The names the edge looks up on every request are canonical, so a lookup
// allocates nothing; and a client's own spelling (any case) still finds
// them.
func TestRequestHeaderNamesAreCanonical40(t *testing.T) {
	names := []string{hdrSessionID, hdrPriority, hdrDeadlineMs, hdrRequestID, hdrAuthorization, hdrAPIKey, hdrAnthropicVersion}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	for _, spelt := range []string{"X-IOP-Session-Id", "x-iop-priority", "X-IOP-DEADLINE-MS", "x-request-id", "authorization", "x-api-key", "anthropic-version"} {
		req.Header.Set(spelt, "v")
	}
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = req
	for _, n := range names {
		if got := http.CanonicalHeaderKey(n); got != n {
			t.Errorf("%q is not canonical (%q): every lookup by it allocates", n, got)
		}
		if c.GetHeader(n) != "v" {
			t.Errorf("%q does not find the header a client sent", n)
		}
		if a := testing.AllocsPerRun(100, func() { _ = c.GetHeader(n) }); a != 0 {
			t.Errorf("looking up %q allocates %.0f times", n, a)
		}
	}
}
