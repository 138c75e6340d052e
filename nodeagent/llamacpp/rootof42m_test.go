package llamacpp

import "testing"

// The root has no trailing slash however the path before /v1 ends, so
// that a probe's URL (root + "/health") has no empty segment.
func TestRootOfNoTrailingSlash42m(t *testing.T) {
	for in, want := range map[string]string{
		"http://gpu:8080//v1":  "http://gpu:8080",
		"http://gw/a//v1/":     "http://gw/a",
		"http://gw/a%2F//v1":   "http://gw/a%2F",
		"http://gw/x/v1/v1":    "http://gw/x/v1",
		"https://gw:8443/v1//": "https://gw:8443",
	} {
		if got, err := rootOf(in); err != nil || got != want {
			t.Errorf("rootOf(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
