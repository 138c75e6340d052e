// Package openaicompat is the Node adapter for OpenAI-compatible HTTP
// backends (adapter type openai_compat) and for vLLM (type vllm: the same
// plus health and load from /health and /metrics).
//
// It serves both paths the Edge uses: Tunnel relays a raw provider request
// byte for byte (SSE split only at event boundaries), and Run executes a
// normalized request, streaming assistant text as deltas and falling back to
// text tool calls when the backend rejects native tools (CONTRACT §5).
package openaicompat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	iopconfig "github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/h1client"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// modelsTimeout caps a model listing.
const modelsTimeout = 30 * time.Second

// Instance is one configured openai_compat or vllm adapter instance.
type Instance struct {
	kind string
	// historyReasoning names the assistant-message member an earlier
	// turn's reasoning is sent back in, so that a reasoning model's
	// template (Qwen 3, DeepSeek, gpt-oss keep the reasoning of the turns
	// after the last user message) sees its chain: reasoningMember for
	// vLLM, reasoningContentMember for llama-server; "" (openai_compat)
	// sends none, since strict OpenAI-style servers refuse a member they
	// do not know. Set at construction only (historyReasoningOf).
	historyReasoning string
	cfg              atomic.Pointer[config]
	client           *http.Client
	getenv           func(string) string
	log              *zap.Logger

	// noNativeTools remembers, per target, that the backend rejected native
	// tools, so auto mode skips the doomed first attempt for a while.
	noNativeTools sync.Map // target -> time.Time (expiry)
	// maxCompletionTokens holds the targets that refused max_tokens and
	// take max_completion_tokens (a model does not change its mind; a new
	// base_url forgets them). One entry per target the config routes here.
	maxCompletionTokens sync.Map // target -> struct{}

	health *healthCache // vllm only
}

var (
	_ adapter.Instance     = (*Instance)(nil)
	_ adapter.Reconfigurer = (*Instance)(nil)
	_ adapter.ModelLister  = (*Instance)(nil)
)

// VLLMInstance is an Instance that also reports vLLM health and load.
type VLLMInstance struct{ *Instance }

var _ adapter.HealthReporter = VLLMInstance{}

var (
	_ adapter.CapabilityReporter = (*Instance)(nil)
	_ adapter.CapabilityReporter = VLLMInstance{}
)

// Capabilities: an OpenAI-compatible server takes any endpoint through
// the tunnel, and chat, completion and embedding as normalized runs; tools
// go to it natively unless tool_mode is text.
func (in *Instance) Capabilities() *iop.AdapterCapabilities {
	return &iop.AdapterCapabilities{
		Tunnel: true, RunOperations: adapter.AllRunOperations, Streaming: true,
		NativeTools: in.cfg.Load().toolMode != iop.ToolMode_TOOL_MODE_TEXT,
		Category:    adapter.CategoryAPI,
	}
}

// Capabilities adds vLLM's health and load source.
func (v VLLMInstance) Capabilities() *iop.AdapterCapabilities {
	c := v.Instance.Capabilities()
	c.HealthSource, c.Category = "vllm /health + /metrics", adapter.CategoryLocalInference
	return c
}

// New builds an openai_compat instance.
func New(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
	return newInstance(cfg, env, TypeOpenAICompat)
}

// NewLlamaServer builds the openai_compat instance a llama-server provider
// (nodeagent/llamacpp) wraps: the same, except that earlier reasoning goes
// back as reasoning_content, the member llama-server reads.
func NewLlamaServer(cfg *iop.AdapterConfig, env adapter.Env) (*Instance, error) {
	in, err := newInstance(cfg, env, TypeOpenAICompat)
	if err != nil {
		return nil, err
	}
	in.historyReasoning = historyReasoningOf(iopconfig.ProviderTypeLlamaCpp)
	return in, nil
}

// historyReasoningOf is the assistant-message member by which a backend
// of provider type kind (the config's nodes[].providers[].type, the key the
// edge's tunnel uses for the same choice) reads an earlier turn's
// reasoning: vLLM's "reasoning", llama-server's "reasoning_content"; none
// for any other type (openai_compat may be any server, a strict one among
// them).
func historyReasoningOf(kind string) string {
	switch kind {
	case iopconfig.ProviderTypeVLLM:
		return reasoningMember
	case iopconfig.ProviderTypeLlamaCpp:
		return reasoningContentMember
	}
	return ""
}

// NewVLLM builds a vllm instance: openai_compat plus adapter.HealthReporter.
func NewVLLM(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
	in, err := newInstance(cfg, env, TypeVLLM)
	if err != nil {
		return nil, err
	}
	in.health = &healthCache{sem: make(chan struct{}, 1)}
	return VLLMInstance{in}, nil
}

func newInstance(cfg *iop.AdapterConfig, env adapter.Env, kind string) (*Instance, error) {
	c, err := parseConfig(cfg, kind)
	if err != nil {
		return nil, err
	}
	in := &Instance{
		kind:             kind,
		historyReasoning: historyReasoningOf(kind),
		client:           &http.Client{Transport: newTransport(), CheckRedirect: adapter.NoRedirect},
		getenv:           env.Getenv,
		log:              env.Logger,
	}
	if in.getenv == nil {
		in.getenv = os.Getenv
	}
	if in.log == nil {
		in.log = zap.NewNop()
	}
	in.log = in.log.With(zap.String("adapter", c.name), zap.String("type", kind))
	in.cfg.Store(c)
	return in, nil
}

// newTransport is shared by every request of one instance. There is no
// overall client timeout (streams run for minutes); each request carries its
// own deadline. Compression stays off so a tunnelled body reaches the caller
// exactly as the upstream encoded it.
//
// A plain-HTTP backend (a vLLM or OpenAI-style server beside the node, the
// common case) is served by h1client: the request and response handled in
// the caller's goroutine, no per-connection goroutines, so that a held
// stream costs one goroutine and one buffer. https, HTTP/2 and proxied
// backends go through http.Transport.
func newTransport() http.RoundTripper {
	std := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           512,
		MaxIdleConnsPerHost:    256,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
	return h1client.New(h1client.Options{
		Fallback:               std,
		Proxy:                  http.ProxyFromEnvironment,
		DialTimeout:            10 * time.Second,
		KeepAlive:              30 * time.Second,
		MaxIdlePerHost:         256,
		IdleTimeout:            90 * time.Second,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	})
}

// Reconfigure applies a same-type config change in place. Capacity is the
// caller's; base_url, headers, timeout_sec, tool_mode and api_key_env apply
// to requests started afterwards (in-flight ones keep their snapshot).
func (in *Instance) Reconfigure(cfg *iop.AdapterConfig) error {
	c, err := parseConfig(cfg, in.kind)
	if err != nil {
		return err
	}
	old := in.cfg.Swap(c)
	if old.base.String() != c.base.String() {
		// Idle connections to the old backend are of no further use, and
		// what we learnt about it no longer holds.
		in.client.CloseIdleConnections()
		in.noNativeTools.Clear()
		in.maxCompletionTokens.Clear()
		if in.health != nil {
			in.health.invalidate()
		}
	}
	return nil
}

// Close releases idle connections. In-flight requests still finish.
func (in *Instance) Close() error {
	in.client.CloseIdleConnections()
	return nil
}

// Models lists the model ids the backend serves (GET {base_url}/models).
func (in *Instance) Models(ctx context.Context) ([]string, error) {
	c := in.cfg.Load()
	// Listing models is quick; a hung backend must not hold the caller.
	timeout := c.timeout
	if timeout <= 0 || timeout > modelsTimeout {
		timeout = modelsTimeout
	}
	rctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.endpoint("/models"), nil)
	if err != nil {
		return nil, fmt.Errorf("openaicompat: models: %w", err)
	}
	in.authorize(req, c)
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, transportError(ctx, rctx, timeout, "models", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, readUpstreamError(resp).adapterError()
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&list); err != nil {
		if ctx.Err() != nil || rctx.Err() != nil {
			return nil, transportError(ctx, rctx, timeout, "models", err)
		}
		return nil, &adapter.Error{Code: adapter.CodeUpstream, Message: "upstream sent an unreadable model list", Err: fmt.Errorf("openaicompat: models: %w", err)}
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

// authorize adds the configured headers and the Node-local key. The key is
// read at request time so that rotating the environment needs no restart.
func (in *Instance) authorize(req *http.Request, c *config) {
	for k, vs := range c.headers {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Del("Authorization")
	if c.apiKeyEnv == "" {
		return
	}
	if key := in.getenv(c.apiKeyEnv); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
}

// postJSON sends body to url with the instance's headers and key.
func (in *Instance) postJSON(ctx context.Context, c *config, url string, body []byte, stream bool) (*http.Response, error) {
	req, release, err := h1client.NewRequest(ctx, http.MethodPost, url, body)
	if err != nil {
		return nil, fmt.Errorf("openaicompat: build request: %w", err)
	}
	defer release()
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	in.authorize(req, c)
	return adapter.RoundTrip(in.client, req)
}

// withTimeout bounds ctx by d when d > 0.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// invalidInput is a malformed RunRequest.input.
func invalidInput(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &adapter.Error{Code: adapter.CodeInvalidRequest, Message: msg, Err: errors.New("openaicompat: " + msg)}
}
