package openaiapi

import "testing"

// HasFormat is true exactly when RunInput would carry a response format:
// json_object or json_schema; absent, null, "text" or no type ask for
// none, and a malformed one is left for RunInput or the provider to
// refuse, as sent.
func TestChatHasFormat34(t *testing.T) {
	for _, c := range []struct {
		member string
		want   bool
	}{
		{``, false},
		{`,"response_format":null`, false},
		{`,"response_format":{"type":"text"}`, false},
		{`,"response_format":{}`, false},
		{`,"response_format":{"type":7}`, false},
		{`,"response_format":{"type":"json_object"}`, true},
		{`,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object"}}}`, true},
	} {
		r, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]` + c.member + `}`))
		if err != nil {
			t.Fatalf("%s: %v", c.member, err)
		}
		if got := r.HasFormat(); got != c.want {
			t.Errorf("%s: HasFormat %v, want %v", c.member, got, c.want)
		}
		in, err := r.RunInput()
		if err == nil && (in.GetResponseFormat() != nil) != c.want {
			t.Errorf("%s: RunInput's format %v, HasFormat %v", c.member, in.GetResponseFormat(), c.want)
		}
	}
}
