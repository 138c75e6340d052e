package openaiapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	openai "github.com/sashabaranov/go-openai"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// typedEdgeErrors are the envelopes the edge answers with, each as the caller
// gets it.
func typedEdgeErrors(t *testing.T) map[string]*Error {
	t.Helper()
	_, smuggled := ParseChat([]byte(`{"model":"m","MODEL":"x","messages":[{"role":"user","content":"hi"}]}`))
	var alias *Error
	if !errors.As(smuggled, &alias) {
		t.Fatalf("smuggled model accepted: %v", smuggled)
	}
	agg := NewChatAggregator(RenderOptions{Model: "m"})
	agg.Add(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop"})
	_, empty := agg.Result()
	return map[string]*Error{
		"invalid request":       InvalidRequest("Missing required parameter: 'messages'.", "messages"),
		"model alias":           alias,
		"invalid api key":       InvalidAPIKey(),
		"model not found":       ModelNotFound("nope"),
		"request too large":     RequestTooLarge(1 << 20),
		"queue full":            QueueFull("m", 3),
		"no provider":           NoProviderAvailable("m"),
		"queue timeout":         QueueTimeout("m"),
		"upstream":              UpstreamError("The provider's node was lost before it answered."),
		"internal":              InternalError(""),
		"empty answer":          empty,
		"run nil":               FromRunError(nil),
		"run upstream 500":      FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "EngineCore encountered an issue.", HttpStatus: 500}),
		"run invalid":           FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "This model's maximum context length is 4096 tokens.", HttpStatus: 400}),
		"run unsupported":       FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UNSUPPORTED, Message: "operation not supported by this provider"}),
		"run capacity":          FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED}),
		"run timeout":           FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_TIMEOUT, Message: "run timed out"}),
		"run internal":          FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_INTERNAL, Message: "internal adapter error"}),
		"run upstream 401":      FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "Unauthorized", HttpStatus: 401}),
		"run upstream 403":      FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "Forbidden", HttpStatus: 403}),
		"run upstream 429":      FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "Rate limit reached for requests", HttpStatus: 429, RetryAfterSec: 20}),
		"run upstream 429 bare": FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, HttpStatus: 429}),
		"run upstream 503":      FromRunError(&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "server busy", HttpStatus: 503, RetryAfterSec: 5}),
	}
}

// typedErrorServer answers every request with e as the edge's writeError does:
// Retry-After when set, the envelope as application/json.
func typedErrorServer(t *testing.T, e *Error) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.Status)
		_, _ = w.Write(e.Envelope())
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// TestSDKsDecodeEveryError: go-openai and openai-go (the official Go SDK) both surface each
// envelope as their typed API error with the edge's status, code, type,
// message and param.
func TestSDKsDecodeEveryError(t *testing.T) {
	for name, e := range typedEdgeErrors(t) {
		t.Run(name, func(t *testing.T) {
			if e == nil || e.Status < 400 || e.Code == "" || e.Message == "" {
				t.Fatalf("bad edge error %+v", e)
			}
			base := typedErrorServer(t, e)

			cfg := openai.DefaultConfig("sk-test")
			cfg.BaseURL = base
			_, err := openai.NewClientWithConfig(cfg).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
				Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
			})
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("go-openai: %T %v is not an *openai.APIError", err, err)
			}
			if apiErr.HTTPStatusCode != e.Status || apiErr.Code != e.Code || apiErr.Type != e.Type || apiErr.Message != e.Message ||
				(e.Param == nil) != (apiErr.Param == nil) || (e.Param != nil && *apiErr.Param != *e.Param) {
				t.Fatalf("go-openai decoded %+v, want %+v", apiErr, e)
			}

			client := oai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
			_, err = client.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{
				Model:    "m",
				Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")},
			})
			var oaiErr *oai.Error
			if !errors.As(err, &oaiErr) {
				t.Fatalf("openai-go: %T %v is not an *openai.Error", err, err)
			}
			wantParam := ""
			if e.Param != nil {
				wantParam = *e.Param
			}
			if oaiErr.StatusCode != e.Status || oaiErr.Code != e.Code || oaiErr.Type != e.Type || oaiErr.Message != e.Message || oaiErr.Param != wantParam {
				t.Fatalf("openai-go decoded status %d code %q type %q message %q param %q, want %+v",
					oaiErr.StatusCode, oaiErr.Code, oaiErr.Type, oaiErr.Message, oaiErr.Param, e)
			}
			wantRetry := ""
			if e.RetryAfter > 0 {
				wantRetry = strconv.Itoa(e.RetryAfter)
			}
			if got := oaiErr.Response.Header.Get("Retry-After"); got != wantRetry {
				t.Fatalf("Retry-After %q, want %q", got, wantRetry)
			}
		})
	}
}

// TestSDKsDecodeStreamError: a run failing after the first byte ends the
// stream with the SSE error event; both SDKs stop with an error carrying
// the envelope.
func TestSDKsDecodeStreamError(t *testing.T) {
	var buf bytes.Buffer
	w := NewChatStreamWriter(&buf, nil, RenderOptions{Model: "m"})
	_ = w.Add(evDelta("par"))
	_ = w.Add(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_ERROR, Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "Rate limit reached", HttpStatus: 429, RetryAfterSec: 9}})
	raw := buf.String()

	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(rw, raw)
	}))
	t.Cleanup(srv.Close)

	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = srv.URL + "/v1"
	st, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		_, err = st.Recv()
		if err != nil {
			break
		}
	}
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != CodeUpstreamError || apiErr.Type != TypeRateLimit || apiErr.Message != "Rate limit reached" {
		t.Fatalf("go-openai stream: %v", err)
	}

	client := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	stream := client.Chat.Completions.NewStreaming(context.Background(), oai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")},
	})
	n := 0
	for stream.Next() {
		n++
	}
	var se *ssestream.StreamError
	if n == 0 || !errors.As(stream.Err(), &se) {
		t.Fatalf("openai-go stream: %d chunks, %v", n, stream.Err())
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(se.Event.Data, &env); err != nil {
		t.Fatal(err)
	}
	var oaiErr oai.Error
	if err := oaiErr.UnmarshalJSON(env["error"]); err != nil ||
		oaiErr.Code != CodeUpstreamError || oaiErr.Message != "Rate limit reached" {
		t.Fatalf("openai-go stream error event %s: %v", se.Event.Data, err)
	}
}
