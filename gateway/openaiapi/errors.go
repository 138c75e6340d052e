package openaiapi

import (
	"errors"
	"fmt"
	"github.com/iop-gateway/iop/internal/jsonenc"
	"net/http"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Error codes of the public error envelope (CONTRACT §5). They are the `code`
// field API callers script against, so they never change.
const (
	CodeInvalidRequest      = "invalid_request"
	CodeInvalidAPIKey       = "invalid_api_key"
	CodeModelNotFound       = "model_not_found"
	CodeRequestTooLarge     = "request_too_large"
	CodeQueueFull           = "queue_full"
	CodeNoProviderAvailable = "no_provider_available"
	CodeQueueTimeout        = "queue_timeout"
	// CodeClusterUnavailable: the edges' shared lease ledger (Redis)
	// cannot be reached, so this edge admits nothing it cannot account for.
	CodeClusterUnavailable = "cluster_unavailable"
	CodeUpstreamError      = "upstream_error"
	CodeInternalError      = "internal_error"
	// CodeRequestTimeout: the request body did not arrive within
	// limits.read_timeout_sec (an addition to CONTRACT §5's codes).
	CodeRequestTimeout = "request_timeout"
)

// Error types of the envelope. OpenAI itself reports bad keys, unknown models
// and malformed requests all as "invalid_request_error" (the `code` tells them
// apart), rate limits as a rate-limit type and its own failures as
// "server_error"; SDKs key their exception classes off the HTTP status, so the
// type is informational and we follow OpenAI's conventions.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeRateLimit      = "rate_limit_error"
	TypeServer         = "server_error"
)

// Sentinel errors, one per code, so callers classify an *Error with
// errors.Is(err, ErrQueueFull) instead of comparing strings.
var (
	ErrInvalidRequest      = errors.New("openaiapi: invalid request")
	ErrInvalidAPIKey       = errors.New("openaiapi: invalid api key")
	ErrModelNotFound       = errors.New("openaiapi: model not found")
	ErrRequestTooLarge     = errors.New("openaiapi: request too large")
	ErrQueueFull           = errors.New("openaiapi: queue full")
	ErrNoProviderAvailable = errors.New("openaiapi: no provider available")
	ErrQueueTimeout        = errors.New("openaiapi: queue timeout")
	ErrClusterUnavailable  = errors.New("openaiapi: cluster unavailable")
	ErrUpstream            = errors.New("openaiapi: upstream error")
	ErrInternal            = errors.New("openaiapi: internal error")
)

var sentinelByCode = map[string]error{
	CodeInvalidRequest:      ErrInvalidRequest,
	CodeInvalidAPIKey:       ErrInvalidAPIKey,
	CodeModelNotFound:       ErrModelNotFound,
	CodeRequestTooLarge:     ErrRequestTooLarge,
	CodeQueueFull:           ErrQueueFull,
	CodeNoProviderAvailable: ErrNoProviderAvailable,
	CodeQueueTimeout:        ErrQueueTimeout,
	CodeClusterUnavailable:  ErrClusterUnavailable,
	CodeUpstreamError:       ErrUpstream,
	CodeInternalError:       ErrInternal,
}

// Error is a failure to be shown to the API caller as an OpenAI error
// envelope with HTTP status Status.
type Error struct {
	Status  int     // HTTP status of the response
	Type    string  // envelope `type`
	Code    string  // envelope `code`: one of the Code* constants
	Message string  // envelope `message`; safe to show to the caller
	Param   *string // envelope `param`: the offending request field, or nil
	// RetryAfter, when > 0, is the number of seconds the handler should put
	// in a Retry-After header (queue_full, an upstream rate limit or brief
	// unavailability).
	RetryAfter int
}

func (e *Error) Error() string {
	if e.Param != nil {
		return fmt.Sprintf("%s (%d): %s [param %s]", e.Code, e.Status, e.Message, *e.Param)
	}
	return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message)
}

// Unwrap returns the sentinel of e's code, which is what makes
// errors.Is(err, ErrUpstream) work for any *Error with that code.
func (e *Error) Unwrap() error { return sentinelByCode[e.Code] }

// envelope is the wire shape; the field order is the order OpenAI uses.
type envelope struct {
	Error envelopeBody `json:"error"`
}

type envelopeBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// Envelope returns the error as
// {"error":{"message":"…","type":"…","param":null,"code":"…"}} (no trailing
// newline).
func (e *Error) Envelope() []byte {
	return mustMarshal(envelope{Error: envelopeBody{
		Message: e.Message, Type: e.Type, Param: e.Param, Code: e.Code,
	}})
}

// MarshalJSON makes json.Marshal (and so gin's c.JSON) produce the envelope.
func (e *Error) MarshalJSON() ([]byte, error) { return e.Envelope(), nil }

// SSEErrorEvent returns the event a stream ends with when it fails after its
// first byte: `data: {"error":{…}}\n\n`. The envelope starts exactly with
// `{"error":`, which is what OpenAI SDKs look for to surface it as an error.
func SSEErrorEvent(e *Error) []byte {
	b := make([]byte, 0, 128)
	b = append(b, "data: "...)
	b = append(b, e.Envelope()...)
	return append(b, "\n\n"...)
}

func newError(status int, typ, code, msg string, param string) *Error {
	e := &Error{Status: status, Type: typ, Code: code, Message: msg}
	if param != "" {
		e.Param = &param
	}
	return e
}

// InvalidRequest is a 400 for a request the edge refuses to route; param
// names the offending field ("" for none).
func InvalidRequest(msg, param string) *Error {
	return newError(http.StatusBadRequest, TypeInvalidRequest, CodeInvalidRequest, msg, param)
}

// InvalidAPIKey is the 401 for a missing or wrong API key. The message never
// echoes the key the caller sent.
func InvalidAPIKey() *Error {
	return newError(http.StatusUnauthorized, TypeInvalidRequest, CodeInvalidAPIKey,
		"Missing or invalid API key. Send it as 'Authorization: Bearer <key>'.", "")
}

// ModelNotFound is the 404 for a model the edge has not configured.
func ModelNotFound(model string) *Error {
	return newError(http.StatusNotFound, TypeInvalidRequest, CodeModelNotFound,
		fmt.Sprintf("The model '%s' does not exist.", truncateForMessage(model)), "")
}

// RequestTooLarge is the 413 for a body over limit bytes.
func RequestTooLarge(limit int64) *Error {
	return newError(http.StatusRequestEntityTooLarge, TypeInvalidRequest, CodeRequestTooLarge,
		fmt.Sprintf("Request body exceeds the limit of %d bytes.", limit), "")
}

// RequestTimeout is the 408 for a request body that did not arrive within
// timeoutSec seconds.
func RequestTimeout(timeoutSec float64) *Error {
	return newError(http.StatusRequestTimeout, TypeInvalidRequest, CodeRequestTimeout,
		fmt.Sprintf("The request body did not arrive within %g seconds.", timeoutSec), "")
}

// QueueFull is the 429 for a model whose wait queue is full; retryAfterSec
// (if > 0) is carried in RetryAfter for the Retry-After header.
func QueueFull(model string, retryAfterSec int) *Error {
	e := newError(http.StatusTooManyRequests, TypeRateLimit, CodeQueueFull,
		fmt.Sprintf("Too many pending requests for model '%s'; retry later.", truncateForMessage(model)), "")
	e.RetryAfter = retryAfterSec
	return e
}

// NoProviderAvailable is the 503 when no live provider serves the model.
func NoProviderAvailable(model string) *Error {
	return newError(http.StatusServiceUnavailable, TypeServer, CodeNoProviderAvailable,
		fmt.Sprintf("No provider is currently available for model '%s'.", truncateForMessage(model)), "")
}

// QueueTimeout is the 503 when the wait for a lease exceeded the model's
// queue_timeout_sec.
func QueueTimeout(model string) *Error {
	return newError(http.StatusServiceUnavailable, TypeServer, CodeQueueTimeout,
		fmt.Sprintf("Timed out waiting for capacity for model '%s'.", truncateForMessage(model)), "")
}

// ClusterUnavailable is the 503 while the cluster's lease ledger cannot be
// reached; clients retry after a second.
func ClusterUnavailable() *Error {
	e := newError(http.StatusServiceUnavailable, TypeServer, CodeClusterUnavailable,
		"The gateway cannot reach its cluster's lease ledger; retry shortly.", "")
	e.RetryAfter = 1
	return e
}

// UpstreamError is the 502 for a provider failure before the first byte.
func UpstreamError(msg string) *Error {
	if msg == "" {
		msg = "The upstream provider failed."
	}
	return newError(http.StatusBadGateway, TypeServer, CodeUpstreamError, msg, "")
}

// InternalError is a 500 for a failure inside the edge itself.
func InternalError(msg string) *Error {
	if msg == "" {
		msg = "Internal error."
	}
	return newError(http.StatusInternalServerError, TypeServer, CodeInternalError, msg, "")
}

// FromRunError maps a run's ERROR event to what the caller sees. The
// upstream status the node reports (http_status) is looked at first:
//
//   - 429 → 429 upstream_error (type rate_limit_error) with Retry-After from
//     retry_after_sec (at least 1): the provider rate limits; SDKs retry
//     429s after the header's delay, which is what the provider asked for.
//   - 401 / 403 → 502 upstream_error "The provider rejected the node's
//     credentials.", whatever the node's message: the upstream refused the
//     node's key, not the caller's.
//   - 503 with retry_after_sec > 0 → 503 no_provider_available with
//     Retry-After: the provider is briefly unavailable and said when to
//     come back. A 503 without that hint stays a 502 below.
//
// then the node's code:
//
//   - invalid_request → 400 invalid_request: the adapter (or the upstream it
//     classified) rejected the request itself; retrying cannot help, so a 5xx
//     would mislead clients into retry loops.
//   - unsupported → 400 invalid_request: the routed provider cannot serve this
//     operation (e.g. embeddings on a CLI agent); it is the request's fault.
//   - capacity_exceeded → 503 no_provider_available: the node's own gate
//     refused, i.e. the provider is momentarily not available; 503 tells SDKs
//     to retry.
//   - anything else (upstream_error, timeout, internal, …) → 502
//     upstream_error.
//
// The message is the node's, which the wire contract requires to be safe for
// the caller; a nil or empty error gets a generic one.
func FromRunError(re *iop.RunError) *Error {
	if re == nil {
		return UpstreamError("")
	}
	msg := re.GetMessage()
	retryAfter := clampRetryAfter(int(re.GetRetryAfterSec()))
	switch status := re.GetHttpStatus(); {
	case status == http.StatusTooManyRequests:
		if msg == "" {
			msg = "The provider is rate limiting; retry later."
		}
		e := newError(http.StatusTooManyRequests, TypeRateLimit, CodeUpstreamError, msg, "")
		e.RetryAfter = max(retryAfter, 1)
		return e
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// The provider refused the node's credentials. The caller's key was
		// fine, so never a 401/403: SDKs would tell the app to check its
		// own key (and some would not retry a fault of the operator's).
		return UpstreamError(msgUpstreamCredentials)
	case status == http.StatusServiceUnavailable && retryAfter > 0:
		if msg == "" {
			msg = "The provider is temporarily unavailable; retry later."
		}
		e := newError(http.StatusServiceUnavailable, TypeServer, CodeNoProviderAvailable, msg, "")
		e.RetryAfter = retryAfter
		return e
	}
	switch re.GetCode() {
	case iop.ErrorCode_ERROR_CODE_INVALID_REQUEST, iop.ErrorCode_ERROR_CODE_UNSUPPORTED:
		if msg == "" {
			msg = "The provider rejected the request."
		}
		return InvalidRequest(msg, "")
	case iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED:
		e := newError(http.StatusServiceUnavailable, TypeServer, CodeNoProviderAvailable, msg, "")
		if msg == "" {
			e.Message = "The provider is at capacity; retry later."
		}
		e.RetryAfter = retryAfter
		return e
	default:
		return UpstreamError(msg)
	}
}

// msgUpstreamCredentials is adapter.MsgUpstreamCredentials (a test keeps
// them equal).
const msgUpstreamCredentials = "The provider rejected the node's credentials."

// maxRetryAfter bounds a Retry-After relayed from a node (the node clamps
// too; the edge does not rely on it).
const maxRetryAfter = 3600

// clampRetryAfter bounds a node-reported retry_after_sec to
// [0, maxRetryAfter]; 0 means "no hint".
func clampRetryAfter(sec int) int { return min(max(sec, 0), maxRetryAfter) }

// errCancelled is what a CANCELLED terminal becomes: the run did not finish,
// which from the caller's side is a provider-side failure.
func errCancelled() *Error { return UpstreamError("The run was cancelled before it completed.") }

// errNoTerminal is what a run stream that ended without a terminal event
// (e.g. the node was lost) becomes.
func errNoTerminal() *Error { return UpstreamError("The provider stream ended unexpectedly.") }

// errAnswerTooLarge is what a non-streamed answer past MaxAnswerBytes
// becomes.
func errAnswerTooLarge() *Error {
	return UpstreamError(fmt.Sprintf("The provider's answer is larger than %d MiB.", MaxAnswerBytes>>20))
}

// errEmptyRun is what a run that completed with no text, tool calls,
// output or usage becomes (see runState.failure).
func errEmptyRun() *Error { return UpstreamError("The provider returned an empty response.") }

// truncateForMessage bounds caller-supplied text echoed into messages so a
// huge `model` value cannot bloat error responses.
func truncateForMessage(s string) string {
	const max = 256
	if len(s) <= max {
		return s
	}
	// Cut on a rune boundary so the message stays valid UTF-8.
	cut := max
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// marshalCompact and mustMarshal encode as every iop peer-facing JSON is
// encoded (see jsonenc).
func marshalCompact(v any) ([]byte, error) { return jsonenc.Marshal(v) }

func mustMarshal(v any) []byte { return jsonenc.Must("openaiapi", v) }
