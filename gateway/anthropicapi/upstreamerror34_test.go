package anthropicapi

import (
	"net/http"
	"testing"
)

// An error document with an empty choices array beside its error is that
// error, as one without choices is: the whole answer and the whole answer
// to a stream request. A choices member holding a choice stays a
// completion (the error beside it a provider's extra).
func TestUpstreamErrorEmptyChoices(t *testing.T) {
	for _, body := range []string{
		`{"choices":[],"error":{"message":"slow down","type":"rate_limit_error","code":429}}`,
		`{"choices": [ ] ,"error":{"message":"slow down","code":"429"}}`,
		`{"object":"error","choices":[],"message":"slow down","code":429}`,
	} {
		e, ok := UpstreamError([]byte(body))
		if !ok || e.Status != http.StatusTooManyRequests || e.Message != "slow down" {
			t.Errorf("%s: %+v %v", body, e, ok)
		}
		s, _, _ := newTestStream(nil)
		if err := s.Whole([]byte(body)); err != nil || s.Failure() == nil || s.Failure().Status != http.StatusTooManyRequests {
			t.Errorf("%s: stream: err %v, failure %+v", body, err, s.Failure())
		}
	}
	for _, body := range []string{
		`{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"error":{"message":"x"}}`,
		`{"choices":{},"error":{"message":"x"}}`,
	} {
		if e, ok := UpstreamError([]byte(body)); ok {
			t.Errorf("%s: taken for an error: %+v", body, e)
		}
	}
}
