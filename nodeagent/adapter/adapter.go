// Package adapter defines what a Node adapter instance is: the contract
// between the Node's session handler (which owns the wire, the capacity gate,
// sequence numbers and terminal events) and the code that talks to one
// backend (vLLM, Ollama, a CLI agent, ...).
//
// The session handler guarantees, around every call it makes here:
//   - a run stream starts with one START event and ends with exactly one
//     terminal event (COMPLETE built from the returned Result, ERROR built
//     from the returned error, or CANCELLED when ctx was cancelled);
//   - a tunnel stream ends with exactly one END (nil error) or ERROR frame;
//   - the Node-local capacity gate was passed before the call.
//
// So an adapter only streams what it sees and returns how it ended.
package adapter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Instance is one configured adapter instance (one provider on this Node).
// Implementations must be safe for concurrent Run and Tunnel calls.
type Instance interface {
	// Run executes a normalized request. It calls sink.Delta for each piece
	// of assistant text as it arrives (for stream and non-stream runs alike;
	// the Edge aggregates) and returns the result on success. It must return
	// promptly once ctx is done, with ctx.Err() or an error wrapping it.
	Run(ctx context.Context, req *iop.RunRequest, sink RunSink) (*Result, error)

	// Tunnel performs a raw provider HTTP request and relays the response:
	// sink.Status once, then sink.Body per chunk (for SSE, split only at event
	// boundaries), and sink.Usage / sink.Metadata for observations. A nil
	// return means the body ended normally. Adapters that cannot tunnel
	// return ErrUnsupported. Cancelling ctx must abort the upstream request.
	Tunnel(ctx context.Context, req *iop.ProviderTunnelRequest, sink TunnelSink) error

	// Close releases idle resources. In-flight calls may still finish.
	Close() error
}

// RunSink receives the streamed output of one run. Calls are made from the
// goroutine running Run, in order.
type RunSink interface {
	// Delta sends the next piece of assistant text. An error means the run's
	// stream is gone; the adapter should stop and return it.
	Delta(text string) error
}

// ReasoningSink is a RunSink that also takes the model's reasoning
// (thinking) text apart from the answer: the node's own sink does. It is a
// separate interface so that sinks with no use for reasoning (tests, tools)
// need not implement it.
type ReasoningSink interface {
	RunSink
	// Reasoning sends the next piece of reasoning text. An error means the
	// run's stream is gone, as for Delta.
	Reasoning(text string) error
}

// Reasoning sends text to sink as reasoning when the sink takes it and
// drops it otherwise: reasoning is never folded into the answer's text.
func Reasoning(sink RunSink, text string) error {
	if rs, ok := sink.(ReasoningSink); ok {
		return rs.Reasoning(text)
	}
	return nil
}

// TunnelSink receives the ordered response of one tunnel.
type TunnelSink interface {
	// Status sends the upstream status and headers. Must be called once,
	// before any Body. Hop-by-hop headers are dropped by the caller.
	Status(code int, header http.Header) error
	// Body sends a chunk of the upstream body. p is copied before Body
	// returns, so the caller may reuse it. Large chunks are split to the wire's
	// chunk bound.
	Body(p []byte) error
	// Usage reports usage observed in the stream (metrics only).
	Usage(u *iop.Usage) error
	// Metadata reports observations for Edge logs (metrics only).
	Metadata(m map[string]string) error
}

// Result is how a successful run ended.
type Result struct {
	// stop, length, tool_calls; empty means "stop".
	FinishReason string
	Usage        *iop.Usage
	// Known keys: MetaToolCalls, MetaTextToolFallback.
	Metadata map[string]string
	// Structured output of non-text operations (embeddings: JSON array of
	// float arrays).
	Output []byte
}

// Metadata keys a run's COMPLETE event may carry (see the wire contract).
const (
	// JSON array of OpenAI tool calls ({"id","type":"function","function":{"name","arguments"}}),
	// arguments always a JSON string.
	MetaToolCalls = "openai_tool_calls"
	// "true" when the adapter retried with the text tool-call instruction.
	MetaTextToolFallback = "openai_text_tool_fallback"
)

// Operations a RunRequest may carry.
const (
	OpChat       = iop.RunOperation_RUN_OPERATION_CHAT
	OpCompletion = iop.RunOperation_RUN_OPERATION_COMPLETION
	OpEmbedding  = iop.RunOperation_RUN_OPERATION_EMBEDDING
)

// Error is a run or tunnel failure with a machine code the Edge maps to its
// HTTP surface. Adapters return it (possibly wrapped) for failures they can
// classify; any other error becomes code "internal".
type Error struct {
	Code       iop.ErrorCode // one of the Code* constants
	Message    string        // safe to show to the API caller; never a secret
	HTTPStatus int           // upstream status when the failure came from one; 0 otherwise
	// RetryAfterSec is the upstream's Retry-After (see ParseRetryAfter) when
	// it rate limited (429) or was briefly unavailable (503); 0 otherwise.
	// It travels as iop.RunError.retry_after_sec so the Edge keeps the
	// status and the header.
	RetryAfterSec int
	Err           error // underlying cause, for logs
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", CodeName(e.Code), e.Message, e.Err)
	}
	return CodeName(e.Code) + ": " + e.Message
}

// CodeName is the lowercase name of an error code for logs ("upstream",
// "invalid_request", ...).
func CodeName(c iop.ErrorCode) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "ERROR_CODE_"))
}

func (e *Error) Unwrap() error { return e.Err }

// Error codes carried in iop.RunError.code.
const (
	CodeUpstream         = iop.ErrorCode_ERROR_CODE_UPSTREAM
	CodeInvalidRequest   = iop.ErrorCode_ERROR_CODE_INVALID_REQUEST
	CodeCapacityExceeded = iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED
	CodeTimeout          = iop.ErrorCode_ERROR_CODE_TIMEOUT
	CodeUnsupported      = iop.ErrorCode_ERROR_CODE_UNSUPPORTED
	CodeInternal         = iop.ErrorCode_ERROR_CODE_INTERNAL
	CodeCancelled        = iop.ErrorCode_ERROR_CODE_CANCELLED
)

// MsgUpstreamCredentials is the message of a run failing because the
// upstream refused the node's own credentials (401/403). The API caller's
// key was fine, so the upstream's text (often "Unauthorized" or "invalid
// api key") must not reach them: it would read as a fault of theirs.
const MsgUpstreamCredentials = "The provider rejected the node's credentials."

// MaxWholeResponse bounds an upstream answer that is read whole: an
// embeddings list, or a chat answer from a server that ignored "stream".
// What it carries travels to the Edge in one wire frame
// (nodewire.DefaultMaxFrameSize, 16 MiB) or as text the Edge holds up to
// as much; the upstream's JSON adds wrappers, escapes and whitespace
// around it, so twice that is read before the answer is refused. Reading
// more would only hold memory for an answer that cannot be delivered.
const MaxWholeResponse = 2 * nodewire.DefaultMaxFrameSize

// EmbeddingsTooLarge is the error of an embeddings answer too large to
// deliver. The size follows from the request (inputs × dimensions), so it
// is the caller's to split: invalid_request, which no other candidate is
// tried for.
func EmbeddingsTooLarge() *Error {
	return &Error{
		Code: CodeInvalidRequest,
		Message: fmt.Sprintf("The embeddings answer is larger than one response may carry (%d MiB); send fewer inputs per request.",
			nodewire.DefaultMaxFrameSize>>20),
		Err: ErrAnswerTooLarge,
	}
}

// Bounds of the tool calls an adapter collects from one answer before the
// COMPLETE event carries them (metadata openai_tool_calls, inside one wire
// frame): a stream that keeps adding calls or argument text is a broken
// or hostile upstream, and its run fails with ToolCallsTooLarge.
const (
	MaxToolCalls     = 1024
	MaxToolCallBytes = 8 << 20 // names and arguments, all calls together
)

// ToolCallsTooLarge is the error of an answer past MaxToolCalls or
// MaxToolCallBytes.
func ToolCallsTooLarge() *Error {
	return &Error{Code: CodeUpstream, Message: fmt.Sprintf(
		"The provider's tool calls exceed %d calls or %d MiB.", MaxToolCalls, MaxToolCallBytes>>20), Err: ErrAnswerTooLarge}
}

// AnswerTooLarge is the error of a chat or completion answer over
// MaxWholeResponse.
func AnswerTooLarge() *Error {
	return &Error{Code: CodeUpstream, Message: fmt.Sprintf("The provider's answer is larger than %d MiB.", MaxWholeResponse>>20), Err: ErrAnswerTooLarge}
}

// ErrAnswerTooLarge is wrapped by errors for answers too large to deliver.
var ErrAnswerTooLarge = errors.New("adapter: answer too large for the wire")

// Bounds of a Retry-After value carried to the Edge: at least a second (a
// zero would invite an immediate retry storm) and at most an hour (a longer
// hint is more likely a broken upstream than a plan).
const (
	MinRetryAfterSec = 1
	MaxRetryAfterSec = 3600
)

// ParseRetryAfter reads an HTTP Retry-After header value, either
// delta-seconds or an HTTP-date (taken relative to now), and returns the
// wait in whole seconds clamped to [MinRetryAfterSec, MaxRetryAfterSec]. It
// returns 0 when v is empty or unparsable: no hint, not "retry at once".
func ParseRetryAfter(v string, now time.Time) int {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var secs int64
	if isAllDigits(v) {
		// delay-seconds is 1*DIGIT (RFC 9110 §10.2.3): no sign, so "-5"
		// and "+5" are no hint, as any other malformed value.
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			n = MaxRetryAfterSec // a delta overflowing int64 is still "a long time"
		}
		secs = n
	} else if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		secs = int64((d + time.Second - 1) / time.Second) // round up: never early
	} else {
		return 0
	}
	return int(min(max(secs, MinRetryAfterSec), MaxRetryAfterSec))
}

func isAllDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// ErrUnsupported is returned by adapters for an operation they do not serve.
var ErrUnsupported = errors.New("adapter: operation not supported")

// Env is what the Node gives every adapter factory. It is Node-local: none of
// it travels on the wire.
type Env struct {
	// StoreDir is the Node's state directory (adapters use a subdirectory
	// named after their instance).
	StoreDir string
	// WorkspaceRoot bounds CLI runs: they execute only below it.
	WorkspaceRoot string
	// Getenv resolves api_key_env and the CLI environment allow-list.
	// Nil means os.Getenv.
	Getenv func(string) string
	Logger *zap.Logger
}

// Factory builds an instance from its wire config. It validates the config
// and returns an error naming every problem it found.
type Factory func(cfg *iop.AdapterConfig, env Env) (Instance, error)

// Optional interfaces an Instance may implement.

// Reconfigurer applies a same-type config change in place (capacity, base_url,
// headers, timeouts), keeping state such as CLI sessions. Instances that do
// not implement it are rebuilt by their Factory instead.
type Reconfigurer interface {
	Reconfigure(cfg *iop.AdapterConfig) error
}

// CapabilityReporter declares what an instance can serve; the node reports
// it to the Edge (with its ready request and after a refresh), which routes
// by it. An instance that does not implement it serves the normalized
// run's chat and completion only (DefaultCapabilities).
type CapabilityReporter interface {
	Capabilities() *iop.AdapterCapabilities
}

// Categories (AdapterCapabilities.category): the resource kind of an
// adapter type, which the Edge shows when its config sets none.
const (
	CategoryAPI            = "api"
	CategoryCLI            = "cli"
	CategoryLocalInference = "local_inference"
)

// DefaultCapabilities are those of an instance that declares none.
func DefaultCapabilities() *iop.AdapterCapabilities {
	return &iop.AdapterCapabilities{RunOperations: []iop.RunOperation{iop.RunOperation_RUN_OPERATION_CHAT, iop.RunOperation_RUN_OPERATION_COMPLETION}}
}

// AllRunOperations is chat, completion and embedding.
var AllRunOperations = []iop.RunOperation{iop.RunOperation_RUN_OPERATION_CHAT, iop.RunOperation_RUN_OPERATION_COMPLETION, iop.RunOperation_RUN_OPERATION_EMBEDDING}

// HealthReporter reports backend health and load for snapshots.
type HealthReporter interface {
	Health(ctx context.Context) Health
}

// Health states an adapter reports.
const (
	HealthUnknown  = iop.HealthState_HEALTH_STATE_UNSPECIFIED
	HealthOK       = iop.HealthState_HEALTH_STATE_OK
	HealthDegraded = iop.HealthState_HEALTH_STATE_DEGRADED
	HealthOffline  = iop.HealthState_HEALTH_STATE_OFFLINE
)

// Health is a backend's state. Zero values mean "unknown".
type Health struct {
	Status       iop.HealthState
	Running      float64
	Waiting      float64
	KVCacheUsage float64 // 0..1
	Detail       string
}

// ModelLister reports the models the backend serves (capabilities command).
type ModelLister interface {
	Models(ctx context.Context) ([]string, error)
}

// SessionManager is implemented by adapters with per-session state (cli).
type SessionManager interface {
	// TerminateSession kills the session's processes and removes its state.
	// Unknown sessions are not an error.
	TerminateSession(id string) error
	// Sessions lists the live sessions.
	Sessions() []SessionInfo
}

// SessionInfo describes one live session.
type SessionInfo struct {
	ID           string `json:"id"`
	Adapter      string `json:"adapter"`
	Running      int    `json:"running"`
	LastUsedUnix int64  `json:"last_used_unix"`
}

// NoRedirect is the CheckRedirect of every adapter's HTTP client: a
// provider's 3xx is its answer, never followed. Following one would re-send
// the prompt and the configured headers (proxy keys: net/http strips only
// Authorization and Cookie across hosts) to wherever the provider, or
// anything on a plain-HTTP path to it, points, internal addresses
// included. A run reports the 3xx as an upstream error; a tunnel relays it.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// RoundTrip sends an adapter's request (a tunnel, a run's generation)
// through c's transport alone, without what http.Client adds around it,
// none of which an adapter's client uses: its redirects are refused
// (NoRedirect), it keeps no cookies and has no overall timeout (each
// request carries its deadline in its context), and base_url may not
// carry credentials. Client.Do cloned the headers for a redirect that
// never comes and wrapped the error once more (*url.Error): six
// allocations per request. The caller ignores a response beside an
// error, as Client.Do does.
func RoundTrip(c *http.Client, req *http.Request) (*http.Response, error) {
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	return rt.RoundTrip(req)
}
