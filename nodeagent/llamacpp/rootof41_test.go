package llamacpp

import "testing"

// llama-server's root keeps base_url's path as written: an escaped
// character before "/v1" stays escaped.
func TestRootOfAsWritten41(t *testing.T) {
	for in, want := range map[string]string{
		"http://gpu:8080/v1/":    "http://gpu:8080",
		"http://gw/llama%2Fa/v1": "http://gw/llama%2Fa",
		"https://gw/x%20y/v1/":   "https://gw/x%20y",
		"http://gw/plain/":       "http://gw/plain",
	} {
		if got, err := rootOf(in); err != nil || got != want {
			t.Errorf("rootOf(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
