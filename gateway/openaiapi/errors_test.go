package openaiapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestErrorConstructors(t *testing.T) {
	cases := []struct {
		e        *Error
		status   int
		typ      string
		code     string
		sentinel error
	}{
		{InvalidRequest("bad", "model"), 400, TypeInvalidRequest, "invalid_request", ErrInvalidRequest},
		{InvalidAPIKey(), 401, TypeInvalidRequest, "invalid_api_key", ErrInvalidAPIKey},
		{ModelNotFound("nope"), 404, TypeInvalidRequest, "model_not_found", ErrModelNotFound},
		{RequestTooLarge(1024), 413, TypeInvalidRequest, "request_too_large", ErrRequestTooLarge},
		{QueueFull("m", 3), 429, TypeRateLimit, "queue_full", ErrQueueFull},
		{NoProviderAvailable("m"), 503, TypeServer, "no_provider_available", ErrNoProviderAvailable},
		{QueueTimeout("m"), 503, TypeServer, "queue_timeout", ErrQueueTimeout},
		{UpstreamError(""), 502, TypeServer, "upstream_error", ErrUpstream},
		{InternalError(""), 500, TypeServer, "internal_error", ErrInternal},
	}
	for _, c := range cases {
		if c.e.Status != c.status || c.e.Type != c.typ || c.e.Code != c.code || c.e.Message == "" {
			t.Errorf("%s: got %d %s %s %q", c.code, c.e.Status, c.e.Type, c.e.Code, c.e.Message)
		}
		var err error = fmt.Errorf("wrapped: %w", c.e)
		if !errors.Is(err, c.sentinel) {
			t.Errorf("%s: errors.Is(sentinel) = false", c.code)
		}
		if errors.Is(err, ErrInternal) != (c.sentinel == ErrInternal) {
			t.Errorf("%s: matches the wrong sentinel", c.code)
		}
		var got *Error
		if !errors.As(err, &got) || got != c.e {
			t.Errorf("%s: errors.As failed", c.code)
		}
		if c.e.Error() == "" {
			t.Errorf("%s: empty Error()", c.code)
		}
	}
	if QueueFull("m", 3).RetryAfter != 3 {
		t.Error("QueueFull lost RetryAfter")
	}
	if strings.Contains(InvalidAPIKey().Message, "sk-") {
		t.Error("api key message must not echo keys")
	}
	long := strings.Repeat("é", 400)
	if m := ModelNotFound(long).Message; len(m) > 400 || !json.Valid(ModelNotFound(long).Envelope()) {
		t.Errorf("long model not truncated: %d bytes", len(m))
	}
}

func TestEnvelopeExact(t *testing.T) {
	e := UpstreamError(`boom <"x">`)
	want := `{"error":{"message":"boom <\"x\">","type":"server_error","param":null,"code":"upstream_error"}}`
	if got := string(e.Envelope()); got != want {
		t.Fatalf("envelope\n got %s\nwant %s", got, want)
	}
	// json.Marshal re-escapes '<' as \u003c after MarshalJSON; same value.
	var viaMarshal, direct any
	b, _ := json.Marshal(e)
	_ = json.Unmarshal(b, &viaMarshal)
	_ = json.Unmarshal([]byte(want), &direct)
	if fmt.Sprint(viaMarshal) != fmt.Sprint(direct) {
		t.Fatalf("json.Marshal = %s", b)
	}
	p := InvalidRequest("x", "messages[0].role")
	if got := string(p.Envelope()); got != `{"error":{"message":"x","type":"invalid_request_error","param":"messages[0].role","code":"invalid_request"}}` {
		t.Fatalf("with param: %s", got)
	}
	if got := string(SSEErrorEvent(e)); got != "data: "+want+"\n\n" {
		t.Fatalf("sse event %q", got)
	}
	// The SDK's own decoding of the envelope.
	var resp openai.ErrorResponse
	if err := json.Unmarshal(p.Envelope(), &resp); err != nil || resp.Error == nil {
		t.Fatal(err)
	}
	if resp.Error.Code != "invalid_request" || resp.Error.Type != "invalid_request_error" || *resp.Error.Param != "messages[0].role" {
		t.Fatalf("sdk decoded %+v", resp.Error)
	}
}

func TestFromRunError(t *testing.T) {
	cases := []struct {
		re     *iop.RunError
		status int
		code   string
		msg    string
	}{
		{nil, 502, CodeUpstreamError, "upstream provider failed"},
		{&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "vllm said no", HttpStatus: 500}, 502, CodeUpstreamError, "vllm said no"},
		{&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "context too long", HttpStatus: 400}, 400, CodeInvalidRequest, "context too long"},
		{&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_INVALID_REQUEST}, 400, CodeInvalidRequest, "rejected"},
		{&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UNSUPPORTED, Message: "no embeddings"}, 400, CodeInvalidRequest, "no embeddings"},
		{&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED}, 503, CodeNoProviderAvailable, "capacity"},
		{&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_TIMEOUT, Message: "took too long"}, 502, CodeUpstreamError, "took too long"},
		{&iop.RunError{Code: iop.ErrorCode_ERROR_CODE_INTERNAL, Message: ""}, 502, CodeUpstreamError, "failed"},
	}
	for _, c := range cases {
		e := FromRunError(c.re)
		if e.Status != c.status || e.Code != c.code || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%v → %d %s %q", c.re, e.Status, e.Code, e.Message)
		}
	}
	if http.StatusText(FromRunError(nil).Status) == "" {
		t.Error("bad status")
	}
}

// The metadata keys and a message are duplicated from the node's
// adapter package to keep the edge free of node code; this keeps them equal.
func TestConstantsMatchAdapter(t *testing.T) {
	pairs := [][2]string{
		{MetaToolCalls, adapter.MetaToolCalls},
		{MetaTextToolFallback, adapter.MetaTextToolFallback},
		{msgUpstreamCredentials, adapter.MsgUpstreamCredentials},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("%q != adapter's %q", p[0], p[1])
		}
	}
}
