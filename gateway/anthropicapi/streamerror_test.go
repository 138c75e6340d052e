package anthropicapi

import (
	"strings"
	"testing"
)

// An error event whose code is the HTTP status as a string (LiteLLM's
// proxy writes {"error":{…,"code":"429"}} into its streams) keeps that
// status, as a numeric code does: a rate limit stays a rate_limit_error the
// client may retry, not a 502 api_error.
func TestStreamErrorWithStatusAsStringCode(t *testing.T) {
	cases := []struct {
		code string
		want Error
	}{
		{`"429"`, Error{429, TypeRateLimit, "m"}},
		{`"400"`, Error{400, TypeInvalidRequest, "m"}},
		{`"529"`, Error{529, TypeOverloaded, "m"}},
		{`"200"`, Error{502, TypeAPI, "m"}},
		{`"42"`, Error{502, TypeAPI, "m"}},
		{`"4290"`, Error{502, TypeAPI, "m"}},
		{`" 429"`, Error{502, TypeAPI, "m"}},
		{`"+429"`, Error{502, TypeAPI, "m"}},
		{`"rate_limit_exceeded"`, Error{502, TypeAPI, "m"}},
	}
	for _, c := range cases {
		body := `{"error":{"message":"m","type":null,"param":null,"code":` + c.code + `}}`
		if got := FromOpenAIError(0, []byte(body)); *got != c.want {
			t.Errorf("code %s: got %+v, want %+v", c.code, *got, c.want)
		}
	}

	s, buf, _ := newTestStream(nil)
	feed(t, s, `{"choices":[{"index":0,"delta":{"content":"a"}}]}`,
		`{"error":{"message":"litellm.RateLimitError: slow down","type":null,"param":null,"code":"429"}}`)
	if f := s.Failure(); f == nil || f.Status != 429 || f.Type != TypeRateLimit {
		t.Fatalf("failure %+v, want a 429 rate_limit_error", f)
	}
	if !strings.Contains(buf.String(), `"type":"rate_limit_error"`) {
		t.Fatalf("stream:\n%s", buf)
	}
}
