package openaiapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// serveEdgeError answers every request the way the edge's handlers write an
// *Error: its status, Retry-After when set, and the envelope as JSON.
func serveEdgeError(t *testing.T, status int, retryAfter int, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSDKDecodesEdgeErrors: go-openai decodes every error envelope the edge
// produces as a typed *openai.APIError with the status, code and message
// the edge meant, and the Retry-After header survives next to it.
func TestSDKDecodesEdgeErrors(t *testing.T) {
	type want struct {
		status     int
		code, msg  string
		retryAfter int
	}
	type tc struct {
		name string
		e    *Error
		want want
	}
	cases := []tc{
		{"run 429", FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "Rate limit reached", HttpStatus: 429, RetryAfterSec: 7}),
			want{429, CodeUpstreamError, "Rate limit reached", 7}},
		{"run 429 no hint", FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, HttpStatus: 429}),
			want{429, CodeUpstreamError, "The provider is rate limiting; retry later.", 1}},
		{"run 503 hint", FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "server busy", HttpStatus: 503, RetryAfterSec: 3}),
			want{503, CodeNoProviderAvailable, "server busy", 3}},
		{"run 401", FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "Unauthorized", HttpStatus: 401}),
			want{502, CodeUpstreamError, "The provider rejected the node's credentials.", 0}},
		{"run 403", FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, HttpStatus: 403}),
			want{502, CodeUpstreamError, "The provider rejected the node's credentials.", 0}},
		{"run invalid", FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "context too long", HttpStatus: 400}),
			want{400, CodeInvalidRequest, "context too long", 0}},
		{"run unsupported", FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UNSUPPORTED, Message: "no embeddings"}),
			want{400, CodeInvalidRequest, "no embeddings", 0}},
		{"run capacity", FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED}),
			want{503, CodeNoProviderAvailable, "The provider is at capacity; retry later.", 0}},
		{"run timeout", FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_TIMEOUT, Message: "upstream did not finish within 1m0s"}),
			want{502, CodeUpstreamError, "upstream did not finish within 1m0s", 0}},
		{"run nil", FromRunError(nil), want{502, CodeUpstreamError, "The upstream provider failed.", 0}},
		{"invalid request", InvalidRequest("The request has a key 'MODEL' that differs from 'model' only in case or spelling; send the model only as 'model'.", "MODEL"),
			want{400, CodeInvalidRequest, "The request has a key 'MODEL' that differs from 'model' only in case or spelling; send the model only as 'model'.", 0}},
		{"queue full", QueueFull("m", 2), want{429, CodeQueueFull, "Too many pending requests for model 'm'; retry later.", 2}},
		{"upstream error", UpstreamError(""), want{502, CodeUpstreamError, "The upstream provider failed.", 0}},
		{"empty run", errEmptyRun(), want{502, CodeUpstreamError, "The provider returned an empty response.", 0}},
		{"no terminal", errNoTerminal(), want{502, CodeUpstreamError, "The provider stream ended unexpectedly.", 0}},
		{"invalid key", InvalidAPIKey(), want{401, CodeInvalidAPIKey, InvalidAPIKey().Message, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkSDKError(t, tc.e.Status, tc.e.RetryAfter, tc.e.Envelope(), tc.want.status, tc.want.code, tc.want.msg, tc.want.retryAfter)
		})
	}

	upstream := []struct {
		name       string
		status     int
		ct, body   string
		wantStatus int
		code, msg  string
	}{
		{"ollama string error", 404, "application/json", `{"error":"model \"llama3\" not found, try pulling it first"}`,
			404, CodeInvalidRequest, `model "llama3" not found, try pulling it first`},
		{"old vllm object error", 400, "application/json", `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`,
			400, CodeInvalidRequest, "This model's maximum context length is 4096 tokens."},
		{"fastapi detail", 422, "application/json", `{"detail":[{"loc":["body","messages"],"msg":"Field required","type":"missing"}]}`,
			422, CodeInvalidRequest, "Field required"},
		{"openai envelope", 429, "application/json", `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			429, "rate_limit_exceeded", "Rate limit reached for requests"},
		{"html 502", 502, "text/html", "<html><body>Bad Gateway</body></html>",
			502, CodeUpstreamError, "The provider answered HTTP 502."},
		{"plain text", 503, "text/plain; charset=utf-8", "upstream connect error\n",
			503, CodeUpstreamError, "upstream connect error"},
		{"401 credentials", 401, "application/json", `{"error":"Unauthorized"}`,
			502, CodeUpstreamError, "The provider rejected the node's credentials (HTTP 401); the node's provider key needs attention."},
	}
	for _, u := range upstream {
		t.Run("normalized/"+u.name, func(t *testing.T) {
			status, body := NormalizeUpstreamError(u.status, u.ct, []byte(u.body))
			checkSDKError(t, status, 0, body, u.wantStatus, u.code, u.msg, 0)
		})
	}
}

func checkSDKError(t *testing.T, status, retryAfter int, body []byte, wantStatus int, wantCode, wantMsg string, wantRetry int) {
	t.Helper()
	srv := serveEdgeError(t, status, retryAfter, body)
	cfg := openai.DefaultConfig("sk-client")
	cfg.BaseURL = srv.URL + "/v1"
	_, err := openai.NewClientWithConfig(cfg).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "m", Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}},
	})
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v (%T) is not an *openai.APIError; body %s", err, err, body)
	}
	if apiErr.HTTPStatusCode != wantStatus || fmt.Sprint(apiErr.Code) != wantCode || apiErr.Message != wantMsg {
		t.Fatalf("APIError status %d code %v message %q; want %d %s %q", apiErr.HTTPStatusCode, apiErr.Code, apiErr.Message, wantStatus, wantCode, wantMsg)
	}
	if apiErr.Type == "" {
		t.Fatalf("APIError without type: %s", body)
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	got := 0
	if h := resp.Header.Get("Retry-After"); h != "" {
		got, _ = strconv.Atoi(h)
	}
	if got != wantRetry {
		t.Fatalf("Retry-After %d, want %d", got, wantRetry)
	}
}
