package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/adapter/texttool"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// tool_mode for Ollama: native sends tools as /api/chat's tools; text
// always uses the text tool-call form (texttool); auto asks Ollama once per
// model whether it can take tools (/api/show's capabilities, the typed
// answer Ollama itself checks a request against) and uses the text form
// for a model without "tools". As a safety net for servers from before
// capabilities existed (and for a model replaced under the same name), a
// native request Ollama refuses with "<model> does not support tools" is
// sent again once in the text form, and the refusal remembered.
const (
	// toolSupportTTL is how long an answer about a model (its capabilities,
	// or a refusal of native tools) is trusted: a model may be pulled
	// again under the same name with another template.
	toolSupportTTL = 10 * time.Minute
	// toolLookupRetry is how long a failed /api/show (an old server or a
	// proxy without it, a slow server) leaves the model on native tools
	// before it is asked again, so a broken lookup costs one round trip
	// per model per interval, not one per request.
	toolLookupRetry = 30 * time.Second
	// maxToolSupportEntries bounds the models remembered per instance.
	maxToolSupportEntries = 1024
	// maxShowBody bounds the /api/show answer read (modelfile, template,
	// license and model_info; no tensors or tokenizer arrays unless
	// verbose is asked, which it is not).
	maxShowBody = maxSmallBody
)

// toolLookupTimeout bounds one /api/show, within the run's own deadline:
// Ollama answers it from the model's manifest in milliseconds, and a run
// must not wait long for a hint. A variable only for tests.
var toolLookupTimeout = 2 * time.Second

// chat runs a chat, applying tool_mode. Tools with tool_choice none take
// the same path as other tools: a model that cannot take native tools gets
// the earlier tool traffic as text too (its template would drop tool calls
// and results), without an instruction and without the run being marked.
func (o *Instance) chat(ctx context.Context, cfg *config, in *iop.RunInput, model string, sink adapter.RunSink) (*adapter.Result, error) {
	if len(in.GetTools()) == 0 || cfg.toolMode == iop.ToolMode_TOOL_MODE_NATIVE {
		return o.chatAs(ctx, cfg, in, model, sink)
	}
	// Earlier calls' arguments are held to the native rule whatever form
	// the run takes, and before any lookup: the same request is refused
	// alike whether or not its model takes tools.
	if err := checkHistoryArguments(in.GetMessages()); err != nil {
		return nil, err
	}
	if cfg.toolMode == iop.ToolMode_TOOL_MODE_TEXT || !o.nativeTools(ctx, cfg, model) {
		return o.textTools(ctx, cfg, in, model, sink)
	}
	res, err := o.chatAs(ctx, cfg, in, model, sink)
	if err == nil || !rejectsTools(err) {
		return res, err
	}
	// Ollama refuses before it streams anything, so nothing reached sink.
	o.log.Info("ollama model does not support tools, retrying with text tool calls",
		zap.String("target", model))
	// Stored only while cfg is current: a run that began before a
	// Reconfigure heard the old server.
	o.tools.put(cfg.toolGen, modelKey(model), false, toolSupportTTL, time.Now())
	return o.textTools(ctx, cfg, in, model, sink)
}

// chatAs runs in as one /api/chat request.
func (o *Instance) chatAs(ctx context.Context, cfg *config, in *iop.RunInput, model string, sink adapter.RunSink) (*adapter.Result, error) {
	body, err := buildChat(in, model, cfg)
	if err != nil {
		return nil, err
	}
	return o.runStream(ctx, cfg, "/api/chat", body, chatText, sink)
}

// textTools runs the chat in the text tool-call form and marks the result
// so that the Edge restores the <tool_call> blocks as tool_calls.
func (o *Instance) textTools(ctx context.Context, cfg *config, in *iop.RunInput, model string, sink adapter.RunSink) (*adapter.Result, error) {
	ti, marked := texttool.Input(in)
	res, err := o.chatAs(ctx, cfg, ti, model, sink)
	if err != nil || !marked {
		return res, err
	}
	texttool.Mark(res)
	return res, nil
}

// rejectsTools reports whether err is Ollama refusing a request's tools
// because the model has no tool capability: HTTP 400 with
// "<model> does not support tools" (the model name, which may itself say
// "tools", comes first; other missing capabilities such as thinking are
// not this refusal).
func rejectsTools(err error) bool {
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.HTTPStatus != http.StatusBadRequest {
		return false
	}
	_, missing, ok := strings.Cut(strings.ToLower(ae.Message), "does not support")
	return ok && strings.Contains(missing, "tools")
}

// nativeTools reports whether model should get tools natively: false only
// when Ollama said it lacks the tools capability (or refused tools for
// it). An unknown answer (a failed or slow lookup, a server without
// capabilities) is native. What is learnt is remembered under the model's
// modelKey. A run whose config a Reconfigure replaced goes native without
// asking: the cache speaks of the new server, and an answer from the old
// one must not be stored for it (the refusal retry still serves that run).
func (o *Instance) nativeTools(ctx context.Context, cfg *config, model string) bool {
	key := modelKey(model)
	native, known, l, lead := o.tools.join(cfg.toolGen, key, time.Now())
	if known {
		return native
	}
	return o.awaitTools(ctx, cfg, model, key, l, lead)
}

// awaitTools finds model's answer when none is remembered: this run asks
// Ollama itself (lead), or waits for the run asking, one lookup per model
// at a time. A lookup that ends without an answer (its run's context
// ended) is taken over by a run waiting for it, which asks in turn. The
// run's whole wait, lookups included, is bounded by toolLookupTimeout
// from here and by its own context; when either ends first it goes
// native.
func (o *Instance) awaitTools(ctx context.Context, cfg *config, model, key string, l *toolLookup, lead bool) bool {
	budget, cancel := context.WithTimeout(ctx, toolLookupTimeout)
	defer cancel()
	// whole: this run has not waited, so a lookup it leads has the whole
	// budget (see lookupTools).
	for whole := true; ; whole = false {
		if lead {
			native, ttl := o.lookupTools(ctx, budget, cfg, model, whole)
			o.tools.finish(cfg.toolGen, key, l, native, ttl)
			return native
		}
		if toolWaitHook != nil {
			toolWaitHook()
		}
		select {
		case <-l.done:
			if !l.abandoned {
				return l.native
			}
		case <-budget.Done():
			return true
		}
		var native, known bool
		if native, known, l, lead = o.tools.join(cfg.toolGen, key, time.Now()); known {
			return native
		}
	}
}

// toolWaitHook, when set (by tests, before any run), is called as a run
// starts waiting for another run's lookup.
var toolWaitHook func()

// lookupTools asks Ollama for model's capabilities within budget (derived
// from the run's ctx). It returns whether to send tools natively and how
// long that answer holds; 0 means not at all, as when the run's own
// context ended before an answer was read whole and the lookup says
// nothing of Ollama, or when a lookup taken over with part of its budget
// (whole false) runs out of it. An answer read whole counts even when the
// run's context ended just after (during the drain of the body's end).
// Ollama saying the model does not exist (404) is no failure of the
// lookup: the run goes native and gets Ollama's own answer to the chat.
func (o *Instance) lookupTools(ctx, budget context.Context, cfg *config, model string, whole bool) (native bool, ttl time.Duration) {
	caps, err := o.showCapabilities(budget, cfg, model)
	switch {
	// An answer read whole is Ollama's, whatever became of the run since
	// (cancelled just as it arrived): it is kept for the runs after.
	case err == nil && caps == nil:
		// A server from before capabilities: the 400 refusal is the net.
		return true, toolSupportTTL
	case err == nil:
		return slices.Contains(caps, "tools"), toolSupportTTL
	case modelNotFound(err):
		o.log.Debug("ollama model not found by the capability lookup, sending tools natively",
			zap.String("target", model))
		return true, toolLookupRetry
	case ctx.Err() != nil, !whole && budget.Err() != nil:
		// Cut short by the run, or by a taken-over lookup's leftover
		// budget: nothing was learnt about Ollama.
		return true, 0
	}
	o.log.Warn("ollama capability lookup failed, sending tools natively",
		zap.String("target", model), zap.Error(err))
	return true, toolLookupRetry
}

// modelNotFound reports whether err is Ollama's 404 for a model it does not
// have (its JSON error, not a page: see statusErr).
func modelNotFound(err error) bool {
	var se *statusErr
	return errors.As(err, &se) && se.status == http.StatusNotFound && se.ollama
}

// maxShowDrain bounds what is read of an /api/show answer after its object
// (Ollama sends nothing more than the end of the chunked body) so that its
// connection goes back to the keep-alive pool; a server that sends more
// loses the connection instead.
const maxShowDrain = 256 << 10

// showCapabilities is /api/show's capabilities for model: nil when the
// answer has none (an Ollama older than the field). ctx bounds the whole
// exchange, the drain of the answer's end included.
func (o *Instance) showCapabilities(ctx context.Context, cfg *config, model string) ([]string, error) {
	req, err := json.Marshal(struct {
		Model string `json:"model"`
	}{model})
	if err != nil {
		return nil, fmt.Errorf("ollama: encode show request: %w", err)
	}
	resp, err := o.do(ctx, cfg, http.MethodPost, "/api/show", req)
	if err != nil {
		return nil, fmt.Errorf("ollama: show model: %w", err)
	}
	defer resp.Body.Close()
	var show struct {
		Capabilities []string `json:"capabilities"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxShowBody)).Decode(&show); err != nil {
		return nil, fmt.Errorf("ollama: decode show answer: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxShowDrain))
	return show.Capabilities, nil
}

// toolSupportCache remembers, per model, whether it takes native tools.
// gen is bumped by Reconfigure, which gives the new config the same value
// (config.toolGen), so that a lookup or refusal heard from the old server
// is not stored as the new one's.
type toolSupportCache struct {
	mu       sync.Mutex // guards the fields below
	gen      uint64
	entries  map[string]toolSupportEntry // by modelKey; bounded by maxToolSupportEntries
	inflight map[string]*toolLookup      // lookups under way, one per modelKey
}

type toolSupportEntry struct {
	native bool
	until  time.Time
}

// toolLookup is one lookup under way. native and abandoned are set before
// done closes; abandoned means the lookup ended without an answer (its
// run's context ended first, or it ran out of what was left of a waiting
// run's budget), for a waiting run to take over.
type toolLookup struct {
	done      chan struct{}
	native    bool
	abandoned bool
}

// join returns what is remembered about key (known), or else the lookup
// under way to wait for, or else a new lookup the caller leads (lead) and
// must finish. A config replaced by a Reconfigure (gen not current) is
// answered native without a lookup.
func (c *toolSupportCache) join(gen uint64, key string, now time.Time) (native, known bool, l *toolLookup, lead bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return true, true, nil, false
	}
	if e, ok := c.entries[key]; ok && now.Before(e.until) {
		return e.native, true, nil, false
	}
	if l, ok := c.inflight[key]; ok {
		return false, false, l, false
	}
	l = &toolLookup{done: make(chan struct{})}
	if c.inflight == nil {
		c.inflight = map[string]*toolLookup{}
	}
	c.inflight[key] = l
	return false, false, l, true
}

// finish ends the lookup l for key: the answer is stored when ttl > 0,
// under the same lock that ends the lookup, so that a run arriving in
// between finds the answer rather than starting another lookup; runs
// waiting for l get it, or take over when there is none (ttl 0).
func (c *toolSupportCache) finish(gen uint64, key string, l *toolLookup, native bool, ttl time.Duration) {
	c.mu.Lock()
	if c.inflight[key] == l {
		delete(c.inflight, key)
	}
	if ttl > 0 {
		c.putLocked(gen, key, native, ttl, time.Now())
	}
	l.native, l.abandoned = native, ttl <= 0
	c.mu.Unlock()
	close(l.done)
}

// put stores an answer about the model of key made under generation gen.
// At the bound, expired entries go first, then an arbitrary one: a
// forgotten model costs one more lookup, never a wrong answer.
func (c *toolSupportCache) put(gen uint64, key string, native bool, ttl time.Duration, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(gen, key, native, ttl, now)
}

func (c *toolSupportCache) putLocked(gen uint64, key string, native bool, ttl time.Duration, now time.Time) {
	if gen != c.gen {
		return
	}
	if c.entries == nil {
		c.entries = map[string]toolSupportEntry{}
	}
	if _, ok := c.entries[key]; !ok && len(c.entries) >= maxToolSupportEntries {
		c.evictLocked(now)
	}
	c.entries[key] = toolSupportEntry{native: native, until: now.Add(ttl)}
}

// evictLocked makes room for one entry.
func (c *toolSupportCache) evictLocked(now time.Time) {
	for k, e := range c.entries {
		if !now.Before(e.until) {
			delete(c.entries, k)
		}
	}
	for k := range c.entries {
		if len(c.entries) < maxToolSupportEntries {
			return
		}
		delete(c.entries, k)
	}
}

// invalidate forgets every answer and detaches the lookups under way (they
// finish for their own runs but store nothing). publish runs under the
// lock with the new generation, to install the config that carries it:
// under the lock, cfg.toolGen equals gen exactly for the config installed
// last, even with Reconfigures racing each other.
func (c *toolSupportCache) invalidate(publish func(gen uint64)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.entries, c.inflight = nil, nil
	publish(c.gen)
}
