// Package ollama is the adapter for Ollama's native API: runs are
// translated from the OpenAI request shape the Edge sends into /api/chat,
// /api/generate and /api/embed calls, and Ollama's NDJSON stream is relayed
// as deltas.
//
// Configuration (AdapterConfig): base_url is Ollama's root, e.g.
// http://127.0.0.1:11434 (default when empty; a trailing "/" or "/v1" is
// dropped); headers are added to every request; api_key_env names a
// Node-local variable whose value is sent as "Authorization: Bearer" (for
// an authenticating proxy in front of Ollama); timeout_sec bounds each run
// (RunRequest.timeout_sec wins when > 0); tool_mode chooses native tools,
// the text tool-call form, or (auto) the text form for models Ollama says
// cannot take tools (texttools.go). Settings: SettingKeepAlive,
// SettingOptions.
//
// Thinking models' reasoning (message.thinking, thinking) is relayed as
// reasoning, apart from the answer; an assistant message's earlier
// reasoning goes back as its thinking; the caller's reasoning_effort sets
// Ollama's think, for chats and completions, as Ollama's own OpenAI layer
// does for chats. Not forwarded:
// logprobs, n > 1. Tunnel is not supported: the Edge routes Ollama through
// normalized runs.
package ollama

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Instance is a configured Ollama adapter. It is safe for concurrent use.
type Instance struct {
	cfg    atomic.Pointer[config]
	client *http.Client
	getenv func(string) string
	log    *zap.Logger
	health healthCache
	tools  toolSupportCache
}

var (
	_ adapter.Instance       = (*Instance)(nil)
	_ adapter.Reconfigurer   = (*Instance)(nil)
	_ adapter.ModelLister    = (*Instance)(nil)
	_ adapter.HealthReporter = (*Instance)(nil)
)

// New validates cfg and builds an instance. It matches adapter.Factory.
func New(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
	o := &Instance{
		// One client per instance: keep-alive connections are pooled per
		// Ollama server and dropped together on Close.
		client: &http.Client{Transport: newTransport(), CheckRedirect: adapter.NoRedirect},
		health: healthCache{probe: make(chan struct{}, 1)},
		getenv: env.Getenv,
		log:    env.Logger,
	}
	if o.getenv == nil {
		o.getenv = os.Getenv
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	c, err := parseConfig(cfg, o.getenv, o.log)
	if err != nil {
		return nil, err
	}
	o.cfg.Store(c)
	return o, nil
}

// Reconfigure applies a new base_url, headers, credentials, timeout or
// settings in place. Runs already started keep the config they began with.
func (o *Instance) Reconfigure(cfg *iop.AdapterConfig) error {
	c, err := parseConfig(cfg, o.getenv, o.log)
	if err != nil {
		return err
	}
	// Another server (or the same one behind another URL) may hold other
	// models under the same names: the tool answers are forgotten as the
	// config is swapped in.
	o.tools.invalidate(func(gen uint64) {
		c.toolGen = gen
		o.cfg.Store(c)
	})
	o.health.invalidate()
	return nil
}

// Capabilities: Ollama's native API serves chat (with tools), completion
// and embedding as normalized runs; it has no tunnel. Tools go to it
// natively unless tool_mode is text.
func (o *Instance) Capabilities() *iop.AdapterCapabilities {
	native := o.cfg.Load().toolMode != iop.ToolMode_TOOL_MODE_TEXT
	return &iop.AdapterCapabilities{RunOperations: adapter.AllRunOperations, NativeTools: native, Streaming: true,
		HealthSource: "ollama reachability", Category: adapter.CategoryLocalInference}
}

// Run executes one chat, completion or embedding request against Ollama.
func (o *Instance) Run(ctx context.Context, req *iop.RunRequest, sink adapter.RunSink) (*adapter.Result, error) {
	cfg := o.cfg.Load()
	runCtx, cancel, limit := withTimeout(ctx, cfg, req.GetTimeoutSec())
	defer cancel()

	res, err := o.run(runCtx, cfg, req, sink)
	if err == nil {
		return res, nil
	}
	if cerr := contextError(ctx, runCtx, limit); cerr != nil {
		return nil, cerr
	}
	if errors.Is(err, errBadInput) {
		return nil, &adapter.Error{Code: adapter.CodeInvalidRequest, Message: err.Error(), Err: err}
	}
	return nil, err
}

func (o *Instance) run(ctx context.Context, cfg *config, req *iop.RunRequest, sink adapter.RunSink) (*adapter.Result, error) {
	if req.GetTarget() == "" {
		return nil, fmt.Errorf("%w: target (the Ollama model) is empty", errBadInput)
	}
	switch op := req.GetOperation(); op {
	case adapter.OpChat:
		return o.chat(ctx, cfg, req.GetInput(), req.GetTarget(), sink)
	case adapter.OpCompletion:
		body, err := buildGenerate(req.GetInput(), req.GetTarget(), cfg)
		if err != nil {
			return nil, err
		}
		return o.runStream(ctx, cfg, "/api/generate", body, generateText, sink)
	case adapter.OpEmbedding:
		return o.runEmbed(ctx, cfg, req)
	default:
		return nil, &adapter.Error{
			Code:    adapter.CodeUnsupported,
			Message: fmt.Sprintf("operation %s is not supported by the ollama adapter", op),
			Err:     adapter.ErrUnsupported,
		}
	}
}

// runStream posts a streaming request and relays its NDJSON output.
func (o *Instance) runStream(ctx context.Context, cfg *config, path string, body any, text textOf, sink adapter.RunSink) (*adapter.Result, error) {
	resp, err := o.post(ctx, cfg, path, body)
	if err != nil {
		return nil, err
	}
	// Closing the body on every return also aborts a stream abandoned
	// early (sink failure), freeing Ollama's slot.
	defer resp.Body.Close()
	out, err := readStream(resp.Body, text, sink)
	if err != nil {
		return nil, err
	}
	// Ollama ends the body right after the done line; reading that end lets
	// the connection go back to the keep-alive pool instead of being closed.
	// The answer is complete already: a server (or a proxy) that leaves the
	// body open gets drainAfterDone, then loses the connection.
	adapter.DrainBody(resp.Body, 4<<10, drainAfterDone)
	return out.result()
}

// Tunnel is not supported: Ollama is served through normalized runs.
func (o *Instance) Tunnel(context.Context, *iop.ProviderTunnelRequest, adapter.TunnelSink) error {
	return adapter.ErrUnsupported
}

// Close drops idle keep-alive connections. In-flight runs finish normally.
func (o *Instance) Close() error {
	o.client.CloseIdleConnections()
	return nil
}
