package openaicompat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/adapter/texttool"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

const (
	// noToolsTTL is how long auto mode trusts that a target rejected native
	// tools before trying them again (the backend may be restarted with
	// tool parsing enabled).
	noToolsTTL = 10 * time.Minute
)

// maxWholeResponse is adapter.MaxWholeResponse, the bound of an answer
// read whole: a variable only for tests, which refuse at a small bound
// rather than read 32 MiB.
var maxWholeResponse = adapter.MaxWholeResponse

// run carries one Run call's context.
type run struct {
	in      *Instance
	c       *config
	parent  context.Context // the caller's
	ctx     context.Context // bounded by the request timeout
	timeout time.Duration
	sink    adapter.RunSink
	target  string // the upstream model
}

// Run executes a normalized chat, completion or embedding request.
func (in *Instance) Run(ctx context.Context, req *iop.RunRequest, sink adapter.RunSink) (*adapter.Result, error) {
	c := in.cfg.Load()
	timeout := c.requestTimeout(req.GetTimeoutSec())
	rctx, cancel := withTimeout(ctx, timeout)
	defer cancel()

	r := &run{in: in, c: c, parent: ctx, ctx: rctx, timeout: timeout, sink: sink, target: req.GetTarget()}
	switch op := req.GetOperation(); op {
	case adapter.OpChat:
		return r.chat(req.GetInput())
	case adapter.OpCompletion:
		body, err := requestBody(req.GetInput(), op, r.target, "")
		if err != nil {
			return nil, err
		}
		setStreaming(body)
		return r.stream("/completions", body)
	case adapter.OpEmbedding:
		body, err := requestBody(req.GetInput(), op, r.target, "")
		if err != nil {
			return nil, err
		}
		return r.embedding(body)
	default:
		return nil, &adapter.Error{
			Code:    adapter.CodeUnsupported,
			Message: fmt.Sprintf("operation %s is not supported", op),
			Err:     adapter.ErrUnsupported,
		}
	}
}

// chat runs a chat completion, applying tool_mode. Tools with tool_choice
// none take the same path as other tools: a backend known to refuse native
// tools gets them in the text form too (no tools member, earlier tool
// traffic as text, no instruction, the run not marked), rather than a
// request it refuses.
func (r *run) chat(input *iop.RunInput) (*adapter.Result, error) {
	body, err := requestBody(input, adapter.OpChat, r.target, r.in.historyReasoning)
	if err != nil {
		return nil, err
	}
	setStreaming(body)
	if len(input.GetTools()) == 0 || r.c.toolMode == iop.ToolMode_TOOL_MODE_NATIVE {
		return r.stream("/chat/completions", body)
	}
	if r.c.toolMode == iop.ToolMode_TOOL_MODE_TEXT || r.in.knownNoTools(r.target) {
		return r.textTools(input)
	}
	resp, ue, err := r.post("/chat/completions", body)
	if err != nil {
		return nil, err
	}
	if ue == nil {
		return r.consume(resp) // input is not used past here (see post)
	}
	if !rejectsTools(*ue) {
		return nil, ue.adapterError()
	}
	r.in.log.Info("backend rejected native tools, retrying with text tool calls",
		zap.String("target", r.target), zap.Int("status", ue.status))
	r.in.rememberNoTools(r.target)
	return r.textTools(input)
}

// textTools runs the chat in the text tool-call form and marks the result.
func (r *run) textTools(input *iop.RunInput) (*adapter.Result, error) {
	ti, marked := textToolInput(input)
	tb, err := requestBody(ti, adapter.OpChat, r.target, r.in.historyReasoning)
	if err != nil {
		return nil, err
	}
	setStreaming(tb)
	res, err := r.stream("/chat/completions", tb)
	if err != nil || !marked {
		return res, err
	}
	texttool.Mark(res)
	return res, nil
}

// stream posts a streaming request and turns a non-2xx answer into an error.
func (r *run) stream(path string, body map[string]json.RawMessage) (*adapter.Result, error) {
	resp, ue, err := r.post(path, body)
	if ue != nil {
		return nil, ue.adapterError()
	}
	if err != nil {
		return nil, err
	}
	return r.consume(resp)
}

// post posts body for a streamed answer. A non-2xx answer comes back as an
// upstreamError for the caller to judge (tool fallback or failure), a 2xx
// one as the response for consume. Posting and consuming are separate so
// that a caller keeps what a fallback would need (the run input, a whole
// prompt) only until the answer's status is known, not while it streams.
//
// A chat body's max_tokens goes as max_completion_tokens to a target known
// to take only that name (OpenAI's reasoning models refuse max_tokens,
// which every other OpenAI-compatible server reads); a target first learns
// it by such a refusal, after which the request is sent again renamed.
func (r *run) post(path string, body map[string]json.RawMessage) (*http.Response, *upstreamError, error) {
	renamable := path == "/chat/completions" && body["max_tokens"] != nil && body["max_completion_tokens"] == nil
	if renamable && r.in.knownMaxCompletionTokens(r.target) {
		renameMaxTokens(body)
		renamable = false
	}
	resp, ue, err := r.postOnce(path, body)
	if ue == nil || !renamable || !ue.refusesMaxTokens() {
		return resp, ue, err
	}
	r.in.log.Info("backend refused max_tokens, retrying with max_completion_tokens",
		zap.String("target", r.target))
	r.in.rememberMaxCompletionTokens(r.target)
	renameMaxTokens(body)
	return r.postOnce(path, body)
}

// postOnce is one attempt of post.
func (r *run) postOnce(path string, body map[string]json.RawMessage) (*http.Response, *upstreamError, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, nil, fmt.Errorf("openaicompat: encode request: %w", err)
	}
	resp, err := r.in.postJSON(r.ctx, r.c, r.c.endpoint(path), raw, true)
	if err != nil {
		return nil, nil, transportError(r.parent, r.ctx, r.timeout, "run", err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		ue := readUpstreamError(resp)
		return nil, &ue, nil
	}
	return resp, nil, nil
}

// consume relays a 2xx stream from post and closes it.
func (r *run) consume(resp *http.Response) (*adapter.Result, error) {
	defer resp.Body.Close()
	st := &streamState{sink: r.sink}
	if err := st.consume(resp); err != nil {
		if isSinkErr(err) || isAdapterErr(err) {
			return nil, err
		}
		return nil, transportError(r.parent, r.ctx, r.timeout, "run stream", err)
	}
	return st.result()
}

// setStreaming asks for a streamed answer with a final usage chunk, keeping
// any other stream_options the caller set.
func setStreaming(body map[string]json.RawMessage) {
	body["stream"] = json.RawMessage("true")
	opts := map[string]json.RawMessage{}
	_ = json.Unmarshal(body["stream_options"], &opts)
	if opts == nil {
		opts = map[string]json.RawMessage{}
	}
	opts["include_usage"] = json.RawMessage("true")
	body["stream_options"] = mustJSON(opts)
}

// refusesMaxTokens reports whether the upstream refused the max_tokens
// member as such (OpenAI's reasoning models), not its value: a value over
// the context is the caller's error and is not retried.
func (ue upstreamError) refusesMaxTokens() bool {
	return ue.status == http.StatusBadRequest && ue.param == "max_tokens" && ue.code == "unsupported_parameter"
}

// renameMaxTokens moves a chat body's max_tokens to max_completion_tokens,
// which OpenAI defines as the same limit.
func renameMaxTokens(body map[string]json.RawMessage) {
	body["max_completion_tokens"] = body["max_tokens"]
	delete(body, "max_tokens")
}

func (in *Instance) knownMaxCompletionTokens(target string) bool {
	_, ok := in.maxCompletionTokens.Load(target)
	return ok
}

func (in *Instance) rememberMaxCompletionTokens(target string) {
	in.maxCompletionTokens.Store(target, struct{}{})
}

func (in *Instance) knownNoTools(target string) bool {
	v, ok := in.noNativeTools.Load(target)
	if !ok {
		return false
	}
	if time.Now().After(v.(time.Time)) {
		in.noNativeTools.CompareAndDelete(target, v)
		return false
	}
	return true
}

func (in *Instance) rememberNoTools(target string) {
	in.noNativeTools.Store(target, time.Now().Add(noToolsTTL))
}

// embedding runs a non-streamed embeddings request. Result.Output is a JSON
// array of float arrays ordered by index, with the numbers exactly as the
// upstream wrote them.
func (r *run) embedding(body map[string]json.RawMessage) (*adapter.Result, error) {
	// Floats are the wire contract for Output; the Edge re-encodes if its
	// caller asked for base64.
	delete(body, "encoding_format")
	delete(body, "stream")
	delete(body, "stream_options")
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("openaicompat: encode request: %w", err)
	}
	resp, err := r.in.postJSON(r.ctx, r.c, r.c.endpoint("/embeddings"), raw, false)
	if err != nil {
		return nil, transportError(r.parent, r.ctx, r.timeout, "embeddings", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, readUpstreamError(resp).adapterError()
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxWholeResponse)+1))
	if err != nil {
		return nil, transportError(r.parent, r.ctx, r.timeout, "embeddings body", err)
	}
	if len(data) > maxWholeResponse {
		return nil, adapter.EmbeddingsTooLarge()
	}
	out, usage, err := embeddingOutput(data)
	if errors.Is(err, errNoChoices) {
		return nil, badAnswer(msgNoChoices, err)
	}
	if err != nil {
		return nil, badAnswer(msgUnreadableBody, fmt.Errorf("%w: %w", errUnreadableBody, err))
	}
	return &adapter.Result{FinishReason: "stop", Usage: usage.proto(), Output: out}, nil
}
