package openaicompat

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A base_url ending in "?" or "#" (nothing after it) is refused as one
// with a query or fragment is: every request's URL is base_url followed
// by its path, which would land in the query or the fragment.
func TestBaseURLEmptyQueryOrFragmentRefused41(t *testing.T) {
	for _, raw := range []string{"http://h?", "http://h/v1?", "http://h/v1#", "http://h/v1/?#", "http://h/v1?x=1", "http://h/v1#f"} {
		if _, err := parseBaseURL(raw); err == nil {
			t.Errorf("%q accepted", raw)
		}
	}
}

// The trailing slashes of base_url are trimmed as written: an escaped
// slash before them stays in the path, escaped, in every request's URL.
func TestBaseURLKeepsAnEscapedSlash41(t *testing.T) {
	for raw, want := range map[string]string{
		"http://h/a%2f/":          "http://h/a%2f/chat/completions",
		"http://h/a%2F//":         "http://h/a%2F/chat/completions",
		"http://h/v1/":            "http://h/v1/chat/completions",
		"http://h/":               "http://h/chat/completions",
		"http://h":                "http://h/chat/completions",
		"https://h:8443/x%20y/v1": "https://h:8443/x%20y/v1/chat/completions",
	} {
		c, err := parseConfig(&iop.AdapterConfig{BaseUrl: raw}, TypeOpenAICompat)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		u, err := c.resolve("/chat/completions")
		if err != nil {
			t.Fatalf("%q: resolve: %v", raw, err)
		}
		if got := u.String(); got != want {
			t.Errorf("%q: request URL %q, want %q", raw, got, want)
		}
		if got := c.endpoint("/chat/completions"); got != want {
			t.Errorf("%q: endpoint %q, want %q", raw, got, want)
		}
	}
}
