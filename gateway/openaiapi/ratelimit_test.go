package openaiapi

import (
	"errors"
	"net/http"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestFromRunErrorRateLimitAndRetryAfter(t *testing.T) {
	cases := []struct {
		name       string
		re         *iop.RunError
		status     int
		typ, code  string
		msg        string
		retryAfter int
	}{
		{"429 with hint", &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "Rate limit reached for requests", HttpStatus: 429, RetryAfterSec: 7},
			429, TypeRateLimit, CodeUpstreamError, "Rate limit reached for requests", 7},
		{"429 without hint", &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, HttpStatus: 429},
			429, TypeRateLimit, CodeUpstreamError, "The provider is rate limiting; retry later.", 1},
		{"429 huge hint", &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "slow down", HttpStatus: 429, RetryAfterSec: 1 << 30},
			429, TypeRateLimit, CodeUpstreamError, "slow down", 3600},
		{"429 negative hint", &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "slow down", HttpStatus: 429, RetryAfterSec: -5},
			429, TypeRateLimit, CodeUpstreamError, "slow down", 1},
		{"503 with hint", &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "server busy", HttpStatus: 503, RetryAfterSec: 4},
			503, TypeServer, CodeNoProviderAvailable, "server busy", 4},
		{"503 with hint, no message", &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, HttpStatus: 503, RetryAfterSec: 4},
			503, TypeServer, CodeNoProviderAvailable, "The provider is temporarily unavailable; retry later.", 4},
		{"503 without hint", &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "server busy", HttpStatus: 503},
			502, TypeServer, CodeUpstreamError, "server busy", 0},
		{"500 ignores a hint", &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "boom", HttpStatus: 500, RetryAfterSec: 9},
			502, TypeServer, CodeUpstreamError, "boom", 0},
		{"node capacity with hint", &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED, RetryAfterSec: 2},
			503, TypeServer, CodeNoProviderAvailable, "The provider is at capacity; retry later.", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := FromRunError(tc.re)
			if e.Status != tc.status || e.Type != tc.typ || e.Code != tc.code || e.Message != tc.msg || e.RetryAfter != tc.retryAfter {
				t.Fatalf("got %d %s %s %q retry %d", e.Status, e.Type, e.Code, e.Message, e.RetryAfter)
			}
			if tc.code == CodeUpstreamError && !errors.Is(e, ErrUpstream) {
				t.Fatal("errors.Is(ErrUpstream) = false")
			}
		})
	}
}

// TestRateLimitBeforeFirstByte: an aggregator and a stream writer both
// answer a rate-limited run with the 429 and its Retry-After.
func TestRateLimitBeforeFirstByte(t *testing.T) {
	ev := evError("upstream_error", "Rate limit reached", http.StatusTooManyRequests)
	ev.Error.RetryAfterSec = 20
	_, _, e := aggregate(t, RenderOptions{Model: "m"}, evStart(nil), ev)
	if e == nil || e.Status != 429 || e.RetryAfter != 20 {
		t.Fatalf("aggregate: %v", e)
	}
	raw, w, err := runStream(t, RenderOptions{Model: "m"}, evStart(nil), ev)
	var se *Error
	if !errors.As(err, &se) || raw != "" || se.Status != 429 || se.RetryAfter != 20 || w.Failure() != se {
		t.Fatalf("stream: %v %q", err, raw)
	}
}

func TestFromRunErrorUpstreamCredentials(t *testing.T) {
	for _, re := range []*iop.RunError{
		{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "The provider rejected the node's credentials.", HttpStatus: 401},
		{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "Unauthorized", HttpStatus: 401},
		{Code: iop.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "Incorrect API key provided: sk-…", HttpStatus: 401},
		{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, HttpStatus: 403, RetryAfterSec: 5},
	} {
		e := FromRunError(re)
		if e.Status != http.StatusBadGateway || e.Code != CodeUpstreamError || e.Type != TypeServer ||
			e.Message != "The provider rejected the node's credentials." || e.RetryAfter != 0 {
			t.Errorf("%v → %d %s %q", re, e.Status, e.Code, e.Message)
		}
	}
}
