package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// anthropic-beta may come as several header lines (HTTP allows a list
// header to repeat, and proxies and hand-written clients do so rather than
// join with commas): the display beta named on the second line is as good
// as on the first, on /v1/messages and count_tokens alike; a line naming
// something else only is not.
func TestMessagesDisplayUpdatesBetaOnSecondHeaderLine(t *testing.T) {
	u := newUpstream(t, vllmHello("Hi"))
	s := tunnelStack(t, u)
	const body = `{"model":"qwen-7b","max_tokens":64,"thinking":{"type":"adaptive","display":"updates"},` +
		`"messages":[{"role":"user","content":"x"}]}`
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		for _, c := range []struct {
			lines []string
			ok    bool
		}{
			{[]string{"interleaved-thinking-2025-05-14", "thinking-display-updates-2026-08-18"}, true},
			{[]string{"interleaved-thinking-2025-05-14", "context-1m-2025-08-07"}, false},
		} {
			req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, s.URL+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			for _, l := range c.lines {
				req.Header.Add("anthropic-beta", l)
			}
			resp, err := httpClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if got := resp.StatusCode == http.StatusOK; got != c.ok {
				t.Errorf("%s, anthropic-beta lines %q: status %d, want ok %v", path, c.lines, resp.StatusCode, c.ok)
			}
		}
	}
}
