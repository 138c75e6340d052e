package ollama

import "testing"

// A base_url ending in "?" or "#" is refused as one with a query or
// fragment is (every request's URL is base_url and its path), and its
// path is trimmed as written: an escaped character stays escaped.
func TestBaseURLAsWritten41(t *testing.T) {
	for _, in := range []string{"http://host?", "http://host/?", "http://host#", "http://host/api/?#"} {
		if got, err := normalizeBaseURL(in); err == nil {
			t.Errorf("normalizeBaseURL(%q) = %q, accepted", in, got)
		}
	}
	for in, want := range map[string]string{
		"http://h/a%2f/":      "http://h/a%2f",
		"http://h/x%20y/v1/":  "http://h/x%20y",
		"http://h/ollama%2F/": "http://h/ollama%2F",
	} {
		if got, err := normalizeBaseURL(in); err != nil || got != want {
			t.Errorf("normalizeBaseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
