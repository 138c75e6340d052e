package anthropicapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/iop-gateway/iop/gateway/openaiapi"
	"github.com/iop-gateway/iop/internal/jsonenc"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Error types of Anthropic's error envelope, one per status Anthropic
// documents (its SDKs' ErrorObject union). SDKs pick their exception class
// from the HTTP status; the type is what scripts branch on.
const (
	TypeInvalidRequest  = "invalid_request_error"
	TypeAuthentication  = "authentication_error"
	TypeBilling         = "billing_error" // 402
	TypePermission      = "permission_error"
	TypeNotFound        = "not_found_error"
	TypeRequestTooLarge = "request_too_large"
	TypeRateLimit       = "rate_limit_error"
	TypeAPI             = "api_error"
	TypeTimeout         = "timeout_error" // 504
	TypeOverloaded      = "overloaded_error"
)

// ErrMalformedUpstream is wrapped by the errors RenderMessage, Chunk and
// Finish return when the OpenAI answer cannot be translated (not JSON, wrong
// types, no choice, a tool call interleaved after its block closed). The
// caller answers 502 api_error (or Fail on a started stream).
var ErrMalformedUpstream = errors.New("anthropicapi: malformed upstream response")

// Error is a failure shown to the API caller as Anthropic's error envelope
// with HTTP status Status. Message is safe to show to the caller.
type Error struct {
	Status  int
	Type    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("anthropicapi: %s (%d): %s", e.Type, e.Status, e.Message)
}

// NewError is an *Error of the given status with the type TypeForStatus
// gives it.
func NewError(status int, message string) *Error {
	return &Error{Status: status, Type: TypeForStatus(status), Message: message}
}

// invalid is the 400 every request validation failure is.
func invalid(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// TypeForStatus is the envelope type Anthropic uses for an HTTP status.
func TypeForStatus(status int) string {
	switch {
	case status == http.StatusBadRequest:
		return TypeInvalidRequest
	case status == http.StatusUnauthorized:
		return TypeAuthentication
	case status == http.StatusPaymentRequired:
		return TypeBilling
	case status == http.StatusForbidden:
		return TypePermission
	case status == http.StatusNotFound:
		return TypeNotFound
	case status == http.StatusRequestEntityTooLarge:
		return TypeRequestTooLarge
	case status == http.StatusTooManyRequests:
		return TypeRateLimit
	case status == http.StatusServiceUnavailable || status == statusOverloaded:
		return TypeOverloaded
	case status == http.StatusGatewayTimeout:
		return TypeTimeout
	case status >= 500 && status <= 599:
		return TypeAPI
	case status >= 400 && status <= 499:
		return TypeInvalidRequest
	default:
		return TypeAPI
	}
}

// statusOverloaded is Anthropic's own "overloaded" status.
const statusOverloaded = 529

type errorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type errorEnvelope struct {
	Type      string    `json:"type"`
	Error     errorBody `json:"error"`
	RequestID string    `json:"request_id,omitempty"`
}

// Envelope returns {"type":"error","error":{"type":…,"message":…}} plus
// "request_id" when requestID is not empty (no trailing newline).
func (e *Error) Envelope(requestID string) []byte {
	return mustMarshal(errorEnvelope{Type: "error", Error: errorBody{Type: e.Type, Message: e.Message}, RequestID: requestID})
}

// WriteError answers with e: status e.Status (500 when it is not an error
// status), Content-Type application/json, the `request-id` header and the
// envelope's request_id when requestID is not empty.
func WriteError(w http.ResponseWriter, requestID string, e *Error) {
	status := e.Status
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if requestID != "" {
		h.Set("request-id", requestID)
	}
	w.WriteHeader(status)
	body := append(e.Envelope(requestID), '\n')
	_, _ = w.Write(body) // the client went away; nothing left to tell it
}

// maxUpstreamMessage bounds an upstream error message relayed to the caller.
const maxUpstreamMessage = 1024

// fixedMessages are what the caller sees when the upstream error body is not
// an error envelope: arbitrary upstream bytes (HTML error pages, stack
// traces) are never relayed.
func fixedMessage(status int) string {
	switch TypeForStatus(status) {
	case TypeInvalidRequest:
		return "The request was rejected."
	case TypeAuthentication:
		return "Missing or invalid API key."
	case TypeBilling:
		return "The provider refused the request for billing reasons."
	case TypePermission:
		return "Permission denied."
	case TypeNotFound:
		return "Not found."
	case TypeRequestTooLarge:
		return "Request too large."
	case TypeRateLimit:
		return "Rate limited; retry later."
	case TypeOverloaded:
		return "The service is overloaded; retry later."
	case TypeTimeout:
		return "The provider did not answer in time."
	default:
		return "The upstream provider failed."
	}
}

// openAIEnvelope accepts OpenAI's {"error":{…}} and old vLLM's flat
// {"object":"error","message":…,"type":…,"code":400} shapes.
type openAIEnvelope struct {
	Error *struct {
		Message json.RawMessage `json:"message"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
	} `json:"error"`
	Object  string          `json:"object"`
	Message json.RawMessage `json:"message"`
	Type    json.RawMessage `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// FromOpenAIError translates an OpenAI error answer (HTTP status and body)
// into the Anthropic error. The message is kept when body is an OpenAI error
// envelope with a string message (bounded to 1 KiB); otherwise it is a fixed
// message for the status, so non-JSON upstream bytes never reach the caller.
//
// status 0 means "unknown" (an error event inside an OpenAI SSE stream): the
// status is then the envelope's code when it is a number in 400..599 or
// such a number as a string (vLLM and LiteLLM put the status there), else
// inferred from its code and type (queue_full or rate_limit_error 429,
// no_provider_available or queue_timeout 503, invalid_request 400,
// otherwise 502). Any other status outside 400..599
// becomes 502: the upstream answered with something that is not an error we
// understand.
func FromOpenAIError(status int, body []byte) *Error {
	var env openAIEnvelope
	msg, code, typ, numeric := "", "", "", 0
	if json.Unmarshal(body, &env) == nil {
		switch {
		case env.Error != nil:
			msg = jsonString(env.Error.Message)
			code = jsonString(env.Error.Code)
			typ = jsonString(env.Error.Type)
			numeric = jsonStatus(env.Error.Code)
		case env.Object == "error":
			msg = jsonString(env.Message)
			code = jsonString(env.Code)
			typ = jsonString(env.Type)
			numeric = jsonStatus(env.Code)
		}
	}
	if status == 0 {
		status = numeric
		if status == 0 {
			status = statusFromOpenAICode(code, typ)
		}
	} else if status < 400 || status > 599 {
		status = http.StatusBadGateway
	}
	msg = strings.TrimSpace(truncate(cleanMessage(msg), maxUpstreamMessage))
	if msg == "" {
		msg = fixedMessage(status)
	}
	return NewError(status, msg)
}

// cleanMessage is an upstream's message without control characters: line
// breaks and tabs become spaces, the rest (escape sequences that would
// drive a terminal showing the error, NULs, C1 controls) are dropped.
func cleanMessage(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return ' '
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, s)
}

// UpstreamError reads a whole answer that came with a success status: when
// body is an upstream's error document instead of a completion (OpenAI's
// {"error":{…}} or old vLLM's {"object":"error",…}, with no choices or
// an empty choices array),
// it is that error, and true: the status as FromOpenAIError(0, body) reads
// it (the envelope's code, else its kind, else 502), the message as
// openaiapi.NormalizeUpstreamError reads it. A 401 or 403
// becomes 502 with NormalizeUpstreamError's fixed message, as the tunnel
// answers an upstream's 401 and 403: the node's provider key failed, not
// the caller's, and the upstream's message may quote that key. Anything else (a completion, or not JSON, which
// RenderMessage refuses as malformed) is nil and false.
func UpstreamError(body []byte) (*Error, bool) {
	var doc struct {
		Choices json.RawMessage `json:"choices"`
		Error   json.RawMessage `json:"error"`
		Object  string          `json:"object"`
	}
	if json.Unmarshal(body, &doc) != nil || hasChoices(doc.Choices) {
		return nil, false
	}
	if (len(doc.Error) == 0 || string(doc.Error) == "null") && doc.Object != "error" {
		return nil, false
	}
	// The status and message as the OpenAI surface reads an upstream's
	// error (an "error" that is a string, FastAPI's detail, …), as an
	// envelope; a 401 or 403 comes back as 502 with the surface's own
	// message, as the upstream's may quote the node's key.
	status, env := openaiapi.NormalizeUpstreamError(FromOpenAIError(0, body).Status, "application/json", body)
	return FromOpenAIError(status, env), true
}

// hasChoices reports whether raw, a document's choices member, holds a
// choice: absent, null and an empty array do not (an error document
// may carry "choices": [] beside its error, and a completion without a
// choice has no answer to render either way), anything else does (a
// malformed choices is left to RenderMessage to refuse).
func hasChoices(raw json.RawMessage) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return false
	}
	var choices []json.RawMessage
	return json.Unmarshal(raw, &choices) != nil || len(choices) > 0
}

func statusFromOpenAICode(code, typ string) int {
	switch {
	case code == "queue_full" || typ == "rate_limit_error":
		return http.StatusTooManyRequests
	case code == "no_provider_available" || code == "queue_timeout":
		return http.StatusServiceUnavailable
	case code == "invalid_request":
		return http.StatusBadRequest
	default:
		return http.StatusBadGateway
	}
}

// jsonStatus is raw as an HTTP error status when it is a JSON integer in
// 400..599 (vLLM's error events carry the status as their code), or a JSON
// string of exactly those three digits (LiteLLM's carry "429"), else 0.
// OpenAI's own codes are words ("rate_limit_exceeded"), never digits.
func jsonStatus(raw json.RawMessage) int {
	digits := string(raw)
	if len(raw) == 5 && raw[0] == '"' && raw[4] == '"' {
		digits = string(raw[1:4])
	}
	if len(digits) != 3 || digits[0] < '0' || digits[0] > '9' {
		return 0 // also refuses what Atoi would take but JSON does not (+429)
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 400 || n > 599 {
		return 0
	}
	return n
}

// jsonString is raw as a Go string when it is a JSON string, else "".
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// truncate bounds s to max bytes on a rune boundary.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// marshalCompact and mustMarshal encode as every iop peer-facing JSON is
// encoded (see jsonenc).
func marshalCompact(v any) ([]byte, error) { return jsonenc.Marshal(v) }

func mustMarshal(v any) []byte { return jsonenc.Must("anthropicapi", v) }
