package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

const (
	// maxErrorBody bounds how much of an upstream error body is read.
	maxErrorBody = 64 << 10
	// maxErrorDrain bounds what is read and discarded of an error body
	// past maxErrorBody (a proxy's error page, vLLM's long validation
	// text), so that its connection goes back to the keep-alive pool (the
	// transport closes a connection whose body is closed unread); a longer
	// body, or a slower one (errorDrainTime), loses the connection instead.
	maxErrorDrain = 256 << 10
	// errorDrainTime bounds the drain whatever the request's own deadline
	// (none when timeout_sec is 0): the error is ready, and a peer that
	// stalls mid-body costs its connection after this, not the wait.
	errorDrainTime = time.Second
	// maxErrorMessage bounds the message shown to the API caller.
	maxErrorMessage = 1024
)

// upstreamError is the structured reading of a non-2xx upstream body.
type upstreamError struct {
	status     int
	message    string // extracted message, or the truncated body
	param      string // OpenAI's error.param: the request member refused, when named
	code       string // OpenAI's error.code when a string, e.g. "unsupported_parameter"
	retryAfter int    // the Retry-After header in seconds (adapter.ParseRetryAfter); 0 if none
}

// parseUpstreamError reads an error body in any of the shapes OpenAI-style
// servers use:
//
//	{"error":{"message":"…","type":"…","param":null,"code":…}}   OpenAI, vLLM ≥ 0.10
//	{"object":"error","message":"…","type":"…","param":null,"code":400}  older vLLM
//	{"error":"…"}                                                  Ollama, llama.cpp variants
//	{"detail":"…"} or {"detail":[{"loc":[…],"msg":"…"}]}          FastAPI validation
//
// and falls back to the (truncated) body text.
func parseUpstreamError(status int, body []byte) upstreamError {
	ue := upstreamError{status: status}
	var doc struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &doc) == nil {
		var inner struct {
			Message json.RawMessage `json:"message"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		}
		switch {
		case jsonString(doc.Error) != "":
			ue.message = jsonString(doc.Error)
		case json.Unmarshal(doc.Error, &inner) == nil && jsonString(inner.Message) != "":
			ue.message = jsonString(inner.Message)
			ue.param, ue.code = jsonString(inner.Param), jsonString(inner.Code)
		case jsonString(doc.Message) != "":
			ue.message = jsonString(doc.Message)
		case len(doc.Detail) > 0:
			ue.message = detailMessage(doc.Detail)
		}
	}
	if ue.message == "" {
		ue.message = strings.TrimSpace(string(body))
	}
	if ue.message == "" {
		ue.message = http.StatusText(status)
	}
	ue.message = truncate(ue.message, maxErrorMessage)
	return ue
}

// detailMessage renders FastAPI's "detail" (a string or a list of
// validation errors) as one line, keeping each error's location so that a
// rejected "tools" field is recognisable.
func detailMessage(raw json.RawMessage) string {
	if s := jsonString(raw); s != "" {
		return s
	}
	var items []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return ""
	}
	parts := make([]string, 0, len(items))
	for _, it := range items {
		loc := make([]string, 0, len(it.Loc))
		for _, l := range it.Loc {
			loc = append(loc, fmt.Sprint(l))
		}
		parts = append(parts, strings.Join(loc, ".")+": "+it.Msg)
	}
	return strings.Join(parts, "; ")
}

// jsonString returns raw as a string when it is a JSON string.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// truncate cuts s to at most n bytes on a rune boundary and makes it valid
// UTF-8 (the message ends up in a protobuf string).
func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// readUpstreamError reads and parses a non-2xx response body, draining
// what follows the part read within bounds (the caller closes it).
func readUpstreamError(resp *http.Response) upstreamError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	adapter.DrainBody(resp.Body, maxErrorDrain, errorDrainTime)
	ue := parseUpstreamError(resp.StatusCode, bytes.TrimSpace(body))
	ue.retryAfter = adapter.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return ue
}

// adapterError turns an upstream error into the failure a run returns. A
// rate limit (429) or a brief unavailability (503) keeps the upstream's
// Retry-After so the Edge can answer with the same status and header. A
// refusal of the node's credentials (401/403) gets a fixed message: the
// upstream's would blame the API caller's key (it stays in Err for logs).
func (ue upstreamError) adapterError() *adapter.Error {
	ae := &adapter.Error{
		Code:       adapter.CodeUpstream,
		Message:    ue.message,
		HTTPStatus: ue.status,
		Err:        fmt.Errorf("openaicompat: upstream status %d", ue.status),
	}
	switch ue.status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		ae.Code = adapter.CodeInvalidRequest
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		ae.RetryAfterSec = ue.retryAfter
	case http.StatusUnauthorized, http.StatusForbidden:
		ae.Message = adapter.MsgUpstreamCredentials
		ae.Err = fmt.Errorf("openaicompat: upstream status %d: %s", ue.status, ue.message)
	}
	return ae
}

// errErrorEvent is the cause of a run failed by an error object inside a
// 2xx answer (an SSE error event, or a whole error document).
var errErrorEvent = errors.New("openaicompat: error event in upstream answer")

// errorEvent classifies an error object a 2xx answer carries. Once its
// stream has started vLLM can no longer answer with a status, so it sends
// the error as an event whose "code" is the status it stands for (400 for
// a prompt its engine refuses on the first read, e.g. a multimodal prompt
// longer than max_model_len). A 4xx code is taken as that status, so the
// run fails as the same error answered up front would (invalid_request for
// a 400: not retried on another provider, not a 502 that SDKs retry). Any
// other code (5xx, OpenAI's word codes, none) leaves an upstream failure.
func errorEvent(data []byte) *adapter.Error {
	ue := parseUpstreamError(0, data)
	if s := errorEventStatus(data); s >= 400 && s < 500 {
		ue.status = s
		ae := ue.adapterError()
		ae.Err = fmt.Errorf("%w: %w", errErrorEvent, ae.Err)
		return ae
	}
	return &adapter.Error{Code: adapter.CodeUpstream, Message: ue.message, Err: errErrorEvent}
}

// errorEventStatus returns the status "code" of an error object, in
// vLLM's shapes ({"error":{"code":400,…}}, before 0.10
// {"object":"error","code":400,…}) or a proxy's ("code":"400"), or 0.
func errorEventStatus(data []byte) int {
	var doc struct {
		Code  json.RawMessage `json:"code"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return 0
	}
	code := doc.Code
	var inner struct {
		Code json.RawMessage `json:"code"`
	}
	if len(doc.Error) > 0 && doc.Error[0] == '{' && json.Unmarshal(doc.Error, &inner) == nil {
		code = inner.Code
	}
	var n int
	if json.Unmarshal(code, &n) == nil {
		return n
	}
	// Proxies in front of vLLM (LiteLLM) write the status as a string,
	// "429"; exactly three digits, so OpenAI's word codes, "+400" and
	// "0400" stay codes, not statuses.
	var str string
	if json.Unmarshal(code, &str) == nil && len(str) == 3 && isDigits(str) {
		n, _ = strconv.Atoi(str)
		return n
	}
	return 0 // another string, a fraction, out of range
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// transportError classifies a failure to talk to the upstream at all.
// parent is the caller's context, ctx the one bounded by the request timeout:
// a cancelled caller yields an error wrapping parent.Err() (so errors.Is
// finds context.Canceled), our own timeout yields CodeTimeout, anything else
// (connection refused, reset, TLS) CodeUpstream.
func transportError(parent, ctx context.Context, timeout time.Duration, op string, err error) error {
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("openaicompat: %s: %w", op, perr)
	}
	if ctx.Err() != nil {
		return &adapter.Error{
			Code:    adapter.CodeTimeout,
			Message: fmt.Sprintf("upstream did not finish within %s", timeout),
			Err:     fmt.Errorf("openaicompat: %s: %w", op, ctx.Err()),
		}
	}
	return &adapter.Error{
		Code:    adapter.CodeUpstream,
		Message: "upstream request failed",
		Err:     fmt.Errorf("openaicompat: %s: %w", op, err),
	}
}

// sinkError marks a failure of the caller's stream: it is returned as is so
// the session handler sees its own error.
func sinkError(what string, err error) error {
	return fmt.Errorf("openaicompat: %s: %w", what, err)
}
