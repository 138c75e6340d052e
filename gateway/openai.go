package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway/anthropicapi"
	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// operation is what a call asks for (its route's RunRequest.operation).
// A byte, not a name: it packs with call's flags (see call).
type operation uint8

// Operations. The zero value is none: every call is built with one.
const (
	opChat operation = iota + 1
	opCompletion
	opEmbedding
	opResponses
)

// call is one API request on its way to a provider. A streamed call
// keeps it for as long as its stream is held, so its layout is kept in
// the 288-byte size class (280 B with Go 1.26; it was 368, in 384): the
// flags sit together after op, and an embedding's rendering options are
// not a member but read from its parsed request when a run renders it
// (embedOptions), 48 B no other call needs. A member added here should
// keep TestCallSizeClass35 passing, or say why not.
type call struct {
	path   string // upstream path relative to the provider base URL
	model  string
	body   []byte // valid JSON (Parse* accepted it, or the edge encoded it): see RewriteValidModel
	tokens int
	render openaiapi.RenderOptions
	parsed parsedRequest // a /v1/responses call's is a responsesRequest (passthrough only)
	// messages is a Messages call's request, from which a tunnel renders
	// its body for its provider's kind (tunnelBody), which a run never
	// needs; bodyReasoning is the member by which body carries earlier
	// thinking (the run rendering's, anthropicapi.ReasoningVLLM, at
	// first). Nil for every other call.
	messages      *anthropicapi.Request
	bodyReasoning anthropicapi.ReasoningMember
	// providerType is the current attempt's provider's adapter type
	// (dispatch.Lease.ProviderType): a Messages call with thinking off
	// tells a vLLM or llama.cpp provider so (templateThinking).
	providerType string
	// prompt is the prefix_affinity rendering the first acquire hashed:
	// failover's re-acquire passes the same, so that the provider the
	// conversation failed over to is the one its next turn finds. k.body
	// may have become the tunnel's rendering by then (tunnelBody).
	prompt []byte
	// Failover state: attempts made, the providers failed on, and the
	// lease failover took for the next attempt (nil: none).
	attempt int
	avoid   []dispatch.ProviderRef
	next    *dispatch.Lease

	op       operation
	stream   bool
	hasTools bool
	// tunnelProvider: the current attempt's provider is OpenAI-compatible
	// (its lease is Tunnel), whichever route serves it; see messagesChat.
	tunnelProvider bool
	// thinkingOff: a Messages call turned thinking off
	// (anthropicapi.Request.ThinkingOff).
	thinkingOff bool
	// formatWithTools: a Messages call asks for an output format
	// (response_format) and offers tools it does not forbid (tool_choice
	// is not none); see formatBlocksTools. Never set on the OpenAI
	// surface, whose request reaches every provider as the client wrote it.
	formatWithTools bool
}

// answered lets go of what only another attempt would need — the request
// body (a whole prompt) and the parsed request — once the answer has begun
// to reach the client: failover can no longer happen, and a stream may
// hold its handler for minutes.
func (k *call) answered() { k.body, k.parsed, k.messages, k.prompt = nil, nil, nil, nil }

// tunnelBody is the body a tunnel sends: k.body, rendered again for the
// current attempt's provider first when a Messages call's body carries
// earlier thinking under another member than the provider reads
// (tunnelReasoning, anthropicapi.Request.TunnelChat). The rendering
// replaces k.body, so one copy is alive at a time and a later attempt on
// a provider of the same kind (failover) reuses it. Thinking off is added
// for the current attempt's provider only (a copy, never k.body): a
// failover from vLLM to a strict server must not carry it.
func (k *call) tunnelBody() ([]byte, error) {
	if k.messages != nil {
		if member := tunnelReasoning(k.providerType); member != k.bodyReasoning {
			b, err := k.messages.TunnelChat(k.body, member)
			if err != nil {
				return nil, fmt.Errorf("gateway: tunnel body: %w", err)
			}
			k.body, k.bodyReasoning = b, member
		}
	}
	body := k.body
	if k.formatWithTools && formatBlocksTools(k.providerType) {
		b, err := withoutResponseFormat(body)
		if err != nil {
			return nil, fmt.Errorf("gateway: tunnel body: %w", err)
		}
		body = b
	}
	if k.thinkingOff && templateThinking(k.providerType) {
		b, err := anthropicapi.WithTemplateThinkingOff(body)
		if err != nil {
			return nil, fmt.Errorf("gateway: tunnel body: %w", err)
		}
		return b, nil
	}
	return body, nil
}

// formatBlocksTools reports whether a provider of adapter type typ (a
// config.ProviderSpec type) can call no tool while it follows a
// response_format, so that a Messages call offering tools it may call goes there
// without its format: the tools work, and the answer that follows them is
// asked for by the prompt only. Each of these turns the format into
// constrained decoding of the whole answer, tool calls included:
//   - vLLM answers the format's JSON at once with tool_choice auto and
//     never calls a tool (vllm-project/vllm #39929; it drops the format
//     itself for a required or named tool_choice);
//   - llama-server's chat parser (common/chat-auto-parser-generator.cpp)
//     builds the answer as reasoning, then the schema's JSON, then the end
//     when a format is given, the tool-call parser only without one, and
//     its grammar is then not lazy: not even a required tool_choice gets a
//     call (older builds wrapped both in a generic JSON envelope);
//   - Ollama samples the whole completion under the schema's grammar (the
//     content after thinking, for a thinking model: server/routes.go
//     ChatHandler), and where it runs llama-server it hands format and
//     tools to that, as above.
//
// OpenAI (openai_compat) takes both: the format shapes the text answer and
// tools are called as usual.
func formatBlocksTools(typ string) bool {
	switch typ {
	case config.ProviderTypeVLLM, config.ProviderTypeLlamaCpp, config.ProviderTypeOllama:
		return true
	}
	return false
}

// withoutResponseFormat is a copy of the chat body chat without its
// response_format member; chat is the edge's own rendering (valid JSON).
func withoutResponseFormat(chat []byte) ([]byte, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(chat, &members); err != nil {
		return nil, err
	}
	delete(members, "response_format")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(members); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// tunnelReasoning is the assistant message member by which a tunnel to a
// provider of adapter type typ (a config.ProviderSpec type) gets a
// Messages conversation's earlier thinking: vLLM's and llama.cpp's own
// names; none for openai_compat, which may be any server, OpenAI's own
// included, and strict ones refuse a member they do not know.
func tunnelReasoning(typ string) anthropicapi.ReasoningMember {
	switch typ {
	case config.ProviderTypeVLLM:
		return anthropicapi.ReasoningVLLM
	case config.ProviderTypeLlamaCpp:
		return anthropicapi.ReasoningContent
	}
	return anthropicapi.ReasoningNone
}

// parsedRequest is the validated request of a call that a normalized run
// may serve (openaiapi's ChatRequest, CompletionRequest, EmbeddingRequest).
type parsedRequest interface {
	// RunSupported is nil when a run can serve the request, or the 400
	// that refuses it (several choices or prompts, logprobs or echo need
	// a tunnel).
	RunSupported() error
	// RunInput normalizes the request for a run from the members its
	// validation read.
	RunInput() (*iop.RunInput, error)
}

func (s *Server) readBody(c *gin.Context) ([]byte, bool) {
	body, err := readAll(c.Request.Body, c.Request.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			writeError(c, openaiapi.RequestTooLarge(mbe.Limit))
		case errors.Is(err, os.ErrDeadlineExceeded):
			writeError(c, openaiapi.RequestTimeout(float64(s.limits.Load().ReadTimeoutSec)))
		case clientGone(err):
			// No one to answer: counted as cancelled, not as a 400 the
			// client got wrong (as a request that leaves its queue is).
			info(c).cancelReason = CancelClientDisconnect
			c.Abort()
		default:
			writeError(c, openaiapi.InvalidRequest("Could not read the request body.", ""))
		}
		return nil, false
	}
	return body, true
}

// clientGone reports whether a request body's read failed because the
// client went away (it closed or reset the connection before sending all
// it declared), rather than because of what it sent.
func clientGone(err error) bool { return clientGoneOn(err, peerGoneErrnos) }

// clientGoneOn is clientGone on a platform whose further errnos for a
// connection the peer reset or aborted are errnos (see clientLeftOn).
func clientGoneOn(err error, errnos []syscall.Errno) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) ||
		isErrno(err, errnos)
}

// The handlers below parse in a separate call and then dispatch: under a
// tunnelled stream their frames stay parked on the stack for as long as
// the stream lasts, so they hold nothing but the call (see tunnel).

func (s *Server) chatCompletions(c *gin.Context) {
	if k := s.chatCall(c); k != nil {
		s.dispatch(c, k)
	}
}

//go:noinline
func (s *Server) chatCall(c *gin.Context) *call {
	body, ok := s.readBody(c)
	if !ok {
		return nil
	}
	req, err := openaiapi.ParseChat(body)
	if err != nil {
		writeError(c, apiError(err, ""))
		return nil
	}
	// The client's request goes as the client wrote it: a response_format
	// beside tools reaches every provider (formatWithTools is a Messages
	// call's only).
	return &call{op: opChat, path: "/chat/completions", model: req.Model, body: body, stream: req.Stream,
		hasTools: req.HasTools, tokens: req.EstimatePromptTokens(), render: req.RenderOptions(), parsed: req}
}

func (s *Server) completions(c *gin.Context) {
	if k := s.completionCall(c); k != nil {
		s.dispatch(c, k)
	}
}

//go:noinline
func (s *Server) completionCall(c *gin.Context) *call {
	body, ok := s.readBody(c)
	if !ok {
		return nil
	}
	req, err := openaiapi.ParseCompletion(body)
	if err != nil {
		writeError(c, apiError(err, ""))
		return nil
	}
	return &call{op: opCompletion, path: "/completions", model: req.Model, body: body, stream: req.Stream,
		tokens: req.EstimatePromptTokens(), render: req.RenderOptions(), parsed: req}
}

func (s *Server) embeddings(c *gin.Context) {
	if k := s.embeddingCall(c); k != nil {
		s.dispatch(c, k)
	}
}

//go:noinline
func (s *Server) embeddingCall(c *gin.Context) *call {
	body, ok := s.readBody(c)
	if !ok {
		return nil
	}
	req, err := openaiapi.ParseEmbedding(body)
	if err != nil {
		writeError(c, apiError(err, ""))
		return nil
	}
	return &call{op: opEmbedding, path: "/embeddings", model: req.Model, body: body,
		tokens: req.EstimatePromptTokens(), parsed: req}
}

func (s *Server) responses(c *gin.Context) {
	if k := s.responsesCall(c); k != nil {
		s.dispatch(c, k)
	}
}

//go:noinline
func (s *Server) responsesCall(c *gin.Context) *call {
	body, ok := s.readBody(c)
	if !ok {
		return nil
	}
	req, err := openaiapi.ParseResponses(body)
	if err != nil {
		writeError(c, apiError(err, ""))
		return nil
	}
	return &call{op: opResponses, path: "/responses", model: req.Model, body: body, stream: req.Stream,
		tokens: len(body) / 4, parsed: responsesRequest{req}}
}

// dispatch takes a lease for the call's model and sends the call down the
// path the chosen provider's capability decides. The lease is released
// exactly once, with the outcome as reason, by the route that served the
// call: after a cancellation that may be after this handler returned (see
// dispatch.Stream.Finish). Acquiring and the non-tunnel routes are
// separate calls, so that this frame, parked under tunnelled streams,
// stays small.
func (s *Server) dispatch(c *gin.Context, k *call) {
	lease, route := s.acquire(c, k)
	for lease != nil {
		k.attempt++
		k.tunnelProvider, k.providerType = lease.Tunnel, lease.ProviderType
		if route == routeTunnel {
			s.tunnel(c, lease, k)
		} else {
			s.runRoute(c, lease, k)
		}
		// A failed attempt that failover took over left its next lease.
		lease, k.next = k.next, nil
		if lease != nil {
			in := info(c)
			in.node, in.provider = lease.NodeID, lease.ProviderID
			route = chooseRoute(lease, k)
			in.route = route
		}
	}
}

// acquire checks the call's model and session id and takes a lease, and
// records them and the route on the request's info. On failure it writes
// the response and returns a nil lease.
//
//go:noinline
func (s *Server) acquire(c *gin.Context, k *call) (*dispatch.Lease, string) {
	in := info(c)
	in.model = k.model
	if !s.knownModel(k.model) {
		in.model = ""
		writeError(c, apiError(dispatch.ErrModelNotFound, k.model))
		return nil, ""
	}
	session := c.GetHeader(hdrSessionID)
	if !validSessionID(session) {
		writeError(c, openaiapi.InvalidRequest("X-IOP-Session-Id must be 1 to 256 printable UTF-8 characters.", ""))
		return nil, ""
	}
	prio, deadline, e := queueHints(c, in)
	if e != nil {
		writeError(c, e)
		return nil, ""
	}
	ctx := c.Request.Context()
	var prompt []byte
	if k.op == opChat || k.op == opCompletion {
		// The prefix_affinity rendering (dispatch.Request.Prompt): the body
		// as sent, or a Messages call's run rendering (earlier thinking
		// included), one canonical form of its conversation whichever
		// route serves it.
		prompt = k.body
	}
	k.prompt = prompt
	lease, err := s.d.Acquire(ctx, dispatch.Request{Model: k.model, PromptTokens: k.tokens, SessionID: session, NeedsTunnel: needsTunnel(k), Prompt: prompt,
		Priority: prio, Deadline: deadline, PreviousResponseID: previousResponseID(k)})
	if err != nil {
		if ctx.Err() != nil {
			in.cancelReason = CancelClientDisconnect
			c.Abort()
			return nil, ""
		}
		// Counted (and timed) under the route the request would have
		// taken on the model's first candidate.
		if tunnel, toolMode, ok := s.d.FirstCandidate(k.model); ok {
			in.route = routeFor(tunnel, toolMode, k)
		}
		if errors.Is(err, dispatch.ErrNoCapableProvider) && k.parsed != nil {
			// No tunnel candidate, and a run cannot serve the request:
			// say which member it cannot serve (n, logprobs, echo)
			// rather than only that the model cannot.
			if rerr := k.parsed.RunSupported(); rerr != nil {
				err = rerr
			}
		}
		writeError(c, apiError(err, k.model))
		return nil, ""
	}
	in.node, in.provider = lease.NodeID, lease.ProviderID
	in.route = chooseRoute(lease, k)
	return lease, in.route
}

// queueHints reads the request's queue priority (its key's, lowered by
// X-IOP-Priority) and deadline (X-IOP-Deadline-Ms: how long from now the
// caller waits for its answer).
func queueHints(c *gin.Context, in *reqInfo) (int, time.Time, *openaiapi.Error) {
	prio := in.priority
	if h := c.GetHeader(hdrPriority); h != "" {
		p, err := strconv.Atoi(h)
		if err != nil || p < config.MinPriority || p > config.MaxPriority {
			return 0, time.Time{}, openaiapi.InvalidRequest(fmt.Sprintf("X-IOP-Priority must be an integer between %d and %d.", config.MinPriority, config.MaxPriority), "")
		}
		prio = min(prio, p) // a request may lower its key's priority, never raise it
	}
	var deadline time.Time
	if h := c.GetHeader(hdrDeadlineMs); h != "" {
		ms, err := strconv.ParseInt(h, 10, 64)
		if err != nil || ms <= 0 || ms > 24*3600*1000 {
			return 0, time.Time{}, openaiapi.InvalidRequest("X-IOP-Deadline-Ms must be a positive number of milliseconds, at most a day.", "")
		}
		deadline = time.Now().Add(time.Duration(ms) * time.Millisecond)
	}
	return prio, deadline, nil
}

// runRoute serves a call whose provider is not tunnelled: a normalized run,
// or a refusal when a run cannot serve it. It releases the lease.
//
//go:noinline
func (s *Server) runRoute(c *gin.Context, lease *dispatch.Lease, k *call) {
	switch {
	case k.op == opResponses:
		defer lease.Release(dispatch.ReasonError)
		writeError(c, openaiapi.InvalidRequest("Model '"+k.model+"' is not served by an OpenAI-compatible provider; /v1/responses is passthrough only.", "model"))
	case k.parsed != nil && k.parsed.RunSupported() != nil:
		// A normalized run renders one choice; n > 1 and batched prompts
		// are only served by the tunnel.
		defer lease.Release(dispatch.ReasonError)
		writeError(c, apiError(k.parsed.RunSupported(), k.model))
	default:
		s.run(c, lease, k)
	}
}

// chooseRoute decides tunnel or run from the provider the lease is on:
// OpenAI-compatible providers tunnel, except chat requests with tools when
// the provider's tool_mode allows the text fallback (auto, text), which run
// so the adapter can fall back. No client-supplied selector exists.
func chooseRoute(l *dispatch.Lease, k *call) string { return routeFor(l.Tunnel, l.ToolMode, k) }

// routeFor is chooseRoute for a provider that is tunnelled or not (as its
// adapter declared), with its tool mode.
func routeFor(tunnel bool, toolMode iop.ToolMode, k *call) string {
	if !tunnel {
		return routeRun
	}
	if k.op == opChat && k.hasTools && toolMode != iop.ToolMode_TOOL_MODE_NATIVE {
		return routeRun
	}
	return routeTunnel
}

// needsTunnel reports whether only a tunnelled provider can serve k:
// /v1/responses, or a request a normalized run cannot render (several
// choices, batched prompts).
func needsTunnel(k *call) bool {
	return k.op == opResponses || (k.parsed != nil && k.parsed.RunSupported() != nil)
}

func (s *Server) knownModel(name string) bool {
	for _, m := range s.models.Load().names {
		if m == name {
			return true
		}
	}
	return false
}

func (s *Server) listModels(c *gin.Context) {
	if c.GetHeader(hdrAnthropicVersion) != "" {
		// An Anthropic SDK: its list shape.
		c.Data(http.StatusOK, "application/json", anthropicapi.ModelsList(s.models.Load().names, time.Unix(s.created, 0)))
		return
	}
	c.Data(http.StatusOK, "application/json", openaiapi.ModelsList(s.models.Load().names, s.created))
}

func (s *Server) getModel(c *gin.Context) {
	id := strings.TrimPrefix(c.Param("id"), "/") // a catch-all keeps the leading slash
	if !s.knownModel(id) {
		writeError(c, apiError(dispatch.ErrModelNotFound, id))
		return
	}
	c.Data(http.StatusOK, "application/json", openaiapi.ModelObject(id, s.created))
}

// canceller is an upstream exchange the edge may abort.
type canceller interface{ Cancel(reason string) }

// cancelState records why an exchange was cancelled; the first reason wins
// and only it cancels.
type cancelState struct {
	mu     sync.Mutex
	reason string // guarded by mu
}

// cancel records reason (first wins) and cancels x.
func (cs *cancelState) cancel(x canceller, reason string) {
	if cs.record(reason) {
		x.Cancel(reason)
	}
}

// record records reason (first wins) without cancelling anything yet, and
// reports whether it was the first. The timeouts use it: the exchange's
// Finish sends the CancelRequest after the client's answer, so that a node
// that does not read its stream cannot hold that answer back.
func (cs *cancelState) record(reason string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.reason != "" {
		return false
	}
	cs.reason = reason
	return true
}

// get returns the recorded reason, or "".
func (cs *cancelState) get() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.reason
}

// clientGone is err from a relay's wait on x, the client's going away
// (dispatch.ErrCallerDone: the request context's Done, which the relay
// gives its stream, closed while it waited or before its next frame)
// turned into what it is: x cancelled as client_disconnect (unless a
// reason came first), and the wait's error context.Canceled, as after any
// cancellation. The relay's own wait observes the client rather than a
// context.AfterFunc on the request context, which cost every held stream
// the context's children map and done channel and the callback (528 B).
func (cs *cancelState) clientGone(x canceller, err error) error {
	if errors.Is(err, dispatch.ErrCallerDone) {
		cs.cancel(x, CancelClientDisconnect)
		return context.Canceled
	}
	return err
}

// A cancelled exchange waits (in the background) up to its lease's
// CancelGrace for the node's terminal message before the lease returns
// anyway. The node frees its capacity slot before it sends that terminal,
// so the next waiter gets the slot rather than a refusal; the grace is
// longer than the adapter's own time to stop a run (dispatch.cancelGrace).
// After it, the node's capacity gate stays its backend's protection: a node
// that has not stopped the run refuses the next request it cannot take,
// which the client sees as an error instead of waiting on a node that does
// not answer.

// validSessionID accepts an absent id, or up to 256 bytes of valid UTF-8
// without control characters (it travels on the wire and names CLI state).
func validSessionID(id string) bool {
	if len(id) > 256 || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
