package openaicompat

import (
	iop "github.com/iop-gateway/iop/proto/gen/iop"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

func TestRunRateLimitKeepsRetryAfter(t *testing.T) {
	// vLLM behind a gateway (or OpenAI itself) rate limiting.
	const rateLimited = `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	cases := []struct {
		name       string
		op         iop.RunOperation
		status     int
		retryAfter string
		wantSec    int
	}{
		{"429 delta", adapter.OpChat, 429, "7", 7},
		{"429 date", adapter.OpChat, 429, time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat), 90},
		{"429 without header", adapter.OpChat, 429, "", 0},
		{"429 huge", adapter.OpCompletion, 429, "86400", adapter.MaxRetryAfterSec},
		{"503 with header", adapter.OpChat, 503, "3", 3},
		{"503 without header", adapter.OpChat, 503, "", 0},
		{"429 embeddings", adapter.OpEmbedding, 429, "2", 2},
		{"500 ignores the header", adapter.OpChat, 500, "5", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runOnce(t, tc.op, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, rateLimited)
			})
			ae := asAdapterError(t, err)
			got := ae.RetryAfterSec
			if tc.name == "429 date" && got >= 89 && got <= 91 {
				got = 90 // the date has second resolution and the clock moves
			}
			if ae.Code != adapter.CodeUpstream || ae.HTTPStatus != tc.status || got != tc.wantSec ||
				ae.Message != "Rate limit reached for requests" {
				t.Fatalf("error %+v", ae)
			}
		})
	}
}

func TestRunUpstreamCredentialsRejected(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{
		// OpenAI / vLLM --api-key / LiteLLM style refusals.
		{401, `{"error":{"message":"Incorrect API key provided: sk-wrong. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		{401, `{"error":"Unauthorized"}`},
		{403, `{"detail":"Not authenticated"}`},
	} {
		for _, op := range []iop.RunOperation{adapter.OpChat, adapter.OpEmbedding} {
			_, _, err := runOnce(t, op, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			ae := asAdapterError(t, err)
			if ae.Code != adapter.CodeUpstream || ae.HTTPStatus != tc.status || ae.Message != adapter.MsgUpstreamCredentials {
				t.Fatalf("%d %s: error %+v", tc.status, op, ae)
			}
		}
	}
}
