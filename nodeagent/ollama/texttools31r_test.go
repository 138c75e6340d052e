package ollama

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// setToolLookupTimeout sets toolLookupTimeout for one test.
func setToolLookupTimeout(t *testing.T, d time.Duration) {
	t.Helper()
	old := toolLookupTimeout
	toolLookupTimeout = d
	t.Cleanup(func() { toolLookupTimeout = old })
}

// setToolWaitHook sets toolWaitHook for one test.
func setToolWaitHook(t *testing.T, hook func()) {
	t.Helper()
	toolWaitHook = hook
	t.Cleanup(func() { toolWaitHook = nil })
}

// underWay makes a lookup for model under way, led by no run: the test
// ends it with inst.tools.finish.
func underWay(inst *Instance, model string) *toolLookup {
	l := &toolLookup{done: make(chan struct{})}
	inst.tools.mu.Lock()
	defer inst.tools.mu.Unlock()
	if inst.tools.inflight == nil {
		inst.tools.inflight = map[string]*toolLookup{}
	}
	inst.tools.inflight[modelKey(model)] = l
	return l
}

// abandonOnWait makes the lookup l for model end without an answer (its
// run cancelled) as soon as a run starts waiting for it, then calls also.
func abandonOnWait(t *testing.T, inst *Instance, model string, l *toolLookup, also func()) {
	cfg := inst.cfg.Load()
	var once sync.Once
	setToolWaitHook(t, func() {
		once.Do(func() {
			inst.tools.finish(cfg.toolGen, modelKey(model), l, true, 0)
			if also != nil {
				also()
			}
		})
	})
}

// entryOf is what the cache holds about model.
func entryOf(inst *Instance, model string) (toolSupportEntry, bool) {
	inst.tools.mu.Lock()
	defer inst.tools.mu.Unlock()
	e, ok := inst.tools.entries[modelKey(model)]
	return e, ok
}

// A run waiting for a lookup that outlives the run's budget (one taken over
// by a run that started waiting later) goes native when its own budget
// ends, without asking Ollama itself.
func TestTextToolsWaitEndsWithOwnBudget(t *testing.T) {
	f := newFake(t)
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	cfg := inst.cfg.Load()
	setToolLookupTimeout(t, 50*time.Millisecond)
	l := underWay(inst, "gemma:2b")
	t.Cleanup(func() { inst.tools.finish(cfg.toolGen, modelKey("gemma:2b"), l, true, 0) })
	got := make(chan bool, 1)
	go func() { got <- inst.nativeTools(context.Background(), cfg, "gemma:2b") }() // Owner: this test; ends with the run's budget.
	select {
	case native := <-got:
		if !native {
			t.Fatal("a run whose wait ran out did not go native")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run waited past its budget")
	}
	noMore(t, f.shows, "lookup")
}

// A run taking over an abandoned lookup first looks at what is remembered:
// an answer another run learnt in between is taken, without a lookup.
func TestTextToolsTakeOverFindsAnswerLearnt(t *testing.T) {
	f := newFake(t) // would answer native (showTools) if asked
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	cfg := inst.cfg.Load()
	l := underWay(inst, "gemma:2b")
	abandonOnWait(t, inst, "gemma:2b", l, func() {
		inst.tools.put(cfg.toolGen, modelKey("gemma:2b"), false, toolSupportTTL, time.Now())
	})
	if inst.nativeTools(context.Background(), cfg, "gemma:2b") {
		t.Fatal("the answer learnt meanwhile was not taken")
	}
	noMore(t, f.shows, "lookup")
}

// A lookup taken over that fails for a reason of Ollama's (not the end of
// the budget it ran on) is remembered like any failed lookup, so that the
// next run does not ask again at once.
func TestTextToolsTakenOverFailureRemembered(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusInternalServerError, `{"error":"boom"}`))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	cfg := inst.cfg.Load()
	setToolLookupTimeout(t, time.Minute) // the lookup ends by Ollama's answer
	abandonOnWait(t, inst, "gemma:2b", underWay(inst, "gemma:2b"), nil)
	if !inst.nativeTools(context.Background(), cfg, "gemma:2b") {
		t.Fatal("a failed lookup did not go native")
	}
	f.show(t)
	e, ok := entryOf(inst, "gemma:2b")
	if !ok || !e.native || time.Until(e.until) > toolLookupRetry {
		t.Fatalf("remembered %+v (%v), want native for toolLookupRetry", e, ok)
	}
}

// A model Ollama does not have is asked about once per toolLookupRetry,
// not once per run.
func TestTextToolsUnknownModelAskedOnce(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusNotFound, `{"error":"model 'gemma:7b' not found"}`))
	f.handle("/api/chat", jsonStatus(http.StatusNotFound, `{"error":"model \"gemma:7b\" not found, try pulling it first"}`))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	shows := countShows(inst)
	for range 2 {
		if _, _, err := runTarget(t, inst, "gemma:7b", toolChat); err == nil {
			t.Fatal("a run for a model Ollama lacks succeeded")
		}
	}
	if n := shows.Load(); n != 1 {
		t.Fatalf("%d lookups for two runs, want 1", n)
	}
}

// A lookup detached by a Reconfigure that ends while the new config's
// lookup for the same model is under way leaves that one in place: a third
// run waits for it rather than asking again.
func TestToolCacheDetachedLookupLeavesNewOne(t *testing.T) {
	var c toolSupportCache
	now := time.Now()
	_, _, old, lead := c.join(0, "gemma:2b", now)
	if !lead {
		t.Fatal("the first run does not lead")
	}
	var gen uint64
	c.invalidate(func(g uint64) { gen = g })
	_, _, cur, lead := c.join(gen, "gemma:2b", now)
	if !lead || cur == old {
		t.Fatal("the new config's run does not lead its own lookup")
	}
	c.finish(0, "gemma:2b", old, true, toolSupportTTL)
	if _, known, l, lead := c.join(gen, "gemma:2b", now); known || lead || l != cur {
		t.Fatalf("known %v, lead %v, same lookup %v: want to wait for the new config's lookup", known, lead, l == cur)
	}
}

// A lookup that ends without an answer takes no room in a full cache.
func TestToolCacheAbandonedLookupTakesNoRoom(t *testing.T) {
	var c toolSupportCache
	now := time.Now()
	for i := range maxToolSupportEntries {
		c.put(0, fmt.Sprint("m", i), false, time.Hour, now)
	}
	_, _, l, _ := c.join(0, "new", now)
	c.finish(0, "new", l, true, 0)
	for i := range maxToolSupportEntries {
		if _, ok := c.entries[fmt.Sprint("m", i)]; !ok {
			t.Fatalf("m%d was dropped for a lookup without an answer", i)
		}
	}
}

// What follows an /api/show object is read up to maxShowDrain, not to the
// end of whatever a broken server keeps sending.
func TestTextToolsShowDrainBounded(t *testing.T) {
	f := newFake(t)
	const padding = 4 * maxShowBody // past what the object itself may take
	f.handle("/api/show", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = io.WriteString(w, showNoTools)
		pad := strings.Repeat(" ", 32<<10)
		for range padding / len(pad) {
			if _, err := io.WriteString(w, pad); err != nil {
				return // the client stopped reading
			}
		}
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	setToolLookupTimeout(t, time.Minute) // the lookup ends by the client's bound
	var read atomic.Int64
	wrapBodies(inst, func(body io.ReadCloser) io.ReadCloser { return &countingBody{ReadCloser: body, n: &read} })
	if inst.nativeTools(context.Background(), inst.cfg.Load(), "gemma:2b") {
		t.Fatal("the answer was not read")
	}
	if n := read.Load(); n > maxShowBody+maxShowDrain {
		t.Fatalf("%d bytes read of the answer, want at most %d", n, maxShowBody+maxShowDrain)
	}
}

// wrapBodies makes inst read every answer's body through wrap.
func wrapBodies(inst *Instance, wrap func(io.ReadCloser) io.ReadCloser) {
	next := inst.client.Transport
	inst.client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if err == nil {
			resp.Body = wrap(resp.Body)
		}
		return resp, err
	})
}

// countingBody adds the bytes read through it to n.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// A 404 whose JSON error is an object (llama.cpp's server and OpenAI-shaped
// proxies answer an unknown route so; Ollama's own error is a string) is a
// route missing, not a model: the failed lookup warns.
func TestTextToolsRouteNotFoundObjectWarns(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusNotFound, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`))
	f.handle("/api/chat", ndjson(chatLineToolCall, chatLineToolDone))
	inst, logs := observed(t, f.URL)
	if !inst.nativeTools(context.Background(), inst.cfg.Load(), "gemma:2b") {
		t.Fatal("a failed lookup did not go native")
	}
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
		t.Fatalf("%d warnings, want 1: %v", n, logs.All())
	}
}
