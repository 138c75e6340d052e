package ollama

import "testing"

// Every trailing slash goes before a trailing /v1 is trimmed: a base_url
// written with two ends on the server's root, not on /v1 of it.
func TestBaseURLTrailingSlashesBeforeV142m(t *testing.T) {
	for in, want := range map[string]string{
		"http://h/v1//":       "http://h",
		"http://h/x%2F/v1///": "http://h/x%2F",
		"http://h/api//":      "http://h/api",
	} {
		if got, err := normalizeBaseURL(in); err != nil || got != want {
			t.Errorf("normalizeBaseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
