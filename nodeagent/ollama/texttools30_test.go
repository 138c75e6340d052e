package ollama

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A chat offering a tool, with earlier tool traffic, as the Edge sends it.
const toolChat = `{"messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"Weather in Paris?"},` +
	`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
	`{"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"user","content":"And in Rome?"}],` +
	`"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`

// What a model answers in the text form: the block streamed over several
// lines, as a model writes it token by token.
var textCallLines = []string{
	`{"model":"gemma:2b","created_at":"2025-05-27T22:54:58.100509Z","message":{"role":"assistant","content":"<tool_call>{\"name\": \"get_weather\", "},"done":false}`,
	`{"model":"gemma:2b","created_at":"2025-05-27T22:54:58.120509Z","message":{"role":"assistant","content":"\"arguments\": {\"city\": \"Rome\"}}</tool_call>"},"done":false}`,
	`{"model":"gemma:2b","created_at":"2025-05-27T22:54:58.219134Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":885095291,"load_duration":3753500,"prompt_eval_count":122,"prompt_eval_duration":328493000,"eval_count":33,"eval_duration":552222000}`,
}

func runTarget(t *testing.T, inst *Instance, target, input string) (*adapter.Result, []string, error) {
	t.Helper()
	sink := newSink()
	res, err := inst.Run(context.Background(), &iop.RunRequest{
		Operation: adapter.OpChat, Target: target, Input: testinput.Chat(input),
	}, sink)
	return res, sink.got(), err
}

// wantTextForm asserts body is the text form of toolChat: no tools, the
// instruction merged into the caller's system message, the earlier call
// and result as text.
func wantTextForm(t *testing.T, body []byte) {
	t.Helper()
	m := decodeBody(t, body)
	if _, ok := m["tools"]; ok {
		t.Fatalf("text form still sends tools: %s", body)
	}
	msgs, _ := m["messages"].([]any)
	if len(msgs) != 5 {
		t.Fatalf("messages %s", asJSON(t, msgs))
	}
	sys := msgs[0].(map[string]any)
	content, _ := sys["content"].(string)
	if sys["role"] != "system" || !strings.HasPrefix(content, "Be terse.\n\n# Tools") ||
		!strings.Contains(content, "## get_weather") || !strings.Contains(content, `<tool_call>{"name": "TOOL_NAME"`) {
		t.Fatalf("system message %q", content)
	}
	wantJSON(t, "history", msgs[2:4], `[
		{"role":"assistant","content":"<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>"},
		{"role":"user","content":"<tool_response>{\"name\":\"get_weather\",\"content\":\"sunny\"}</tool_response>"}]`)
}

func wantMarked(t *testing.T, res *adapter.Result, deltas []string) {
	t.Helper()
	if res.Metadata[adapter.MetaTextToolFallback] != "true" {
		t.Fatalf("metadata %v, want the text fallback marked", res.Metadata)
	}
	if _, ok := res.Metadata[adapter.MetaToolCalls]; ok {
		t.Fatalf("metadata %v has native tool calls", res.Metadata)
	}
	if got := strings.Join(deltas, ""); got != `<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>` {
		t.Fatalf("deltas %q", deltas)
	}
}

func noMore(t *testing.T, ch chan captured, what string) {
	t.Helper()
	select {
	case c := <-ch:
		t.Fatalf("unexpected %s: %s %s %s", what, c.method, c.path, c.body)
	default:
	}
}

// auto: a model whose /api/show capabilities lack "tools" gets the text
// form from its first request, and the answer is marked for the Edge; the
// capability is asked once, not per request.
func TestTextToolsAutoModelWithoutToolsCapability(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
	f.handle("/api/chat", ndjson(textCallLines...))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})

	for i := range 2 {
		res, deltas, err := runTarget(t, inst, "gemma:2b", toolChat)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		wantMarked(t, res, deltas)
		wantTextForm(t, f.request(t).body)
	}
	show := f.show(t)
	if show.method != http.MethodPost || string(show.body) != `{"model":"gemma:2b"}` {
		t.Fatalf("show request %s %s", show.method, show.body)
	}
	noMore(t, f.shows, "second capability lookup")
}

// auto: a model with "tools" gets them natively, unmarked.
func TestTextToolsAutoModelWithTools(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineToolCall, chatLineToolDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	res, _, err := runTarget(t, inst, "llama3.2", toolChat)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := decodeBody(t, f.request(t).body)["tools"]; !ok {
		t.Fatal("tools not sent natively")
	}
	if _, ok := res.Metadata[adapter.MetaTextToolFallback]; ok || res.Metadata[adapter.MetaToolCalls] == "" {
		t.Fatalf("metadata %v", res.Metadata)
	}
}

// auto on an Ollama without capabilities: the native request's 400 "does
// not support tools" is retried once in the text form, and remembered so
// the next request goes straight to it.
func TestTextToolsRetryOnRefusal(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusOK, showNoCapabilities))
	textAnswer := ndjson(textCallLines...)
	f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(string(readBody(r)), `"tools":`) {
			jsonStatus(http.StatusBadRequest, noToolsError)(w, r)
			return
		}
		textAnswer(w, r)
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})

	res, deltas, err := runTarget(t, inst, "gemma:2b", toolChat)
	if err != nil {
		t.Fatal(err)
	}
	wantMarked(t, res, deltas)
	if _, ok := decodeBody(t, f.request(t).body)["tools"]; !ok {
		t.Fatal("first request was not native")
	}
	wantTextForm(t, f.request(t).body)

	res, deltas, err = runTarget(t, inst, "gemma:2b", toolChat)
	if err != nil {
		t.Fatal(err)
	}
	wantMarked(t, res, deltas)
	wantTextForm(t, f.request(t).body) // no native attempt first
	noMore(t, f.reqs, "request")
}

// tool_mode text: the text form without asking Ollama anything; the
// adapter declares no native tools. tool_mode native: a refusal is the
// answer, with no retry and no lookup.
func TestTextToolsModes(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		f := newFake(t)
		f.handle("/api/chat", ndjson(textCallLines...))
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, ToolMode: iop.ToolMode_TOOL_MODE_TEXT})
		if inst.Capabilities().GetNativeTools() {
			t.Error("tool_mode text declares native tools")
		}
		res, deltas, err := runTarget(t, inst, "llama3.2", toolChat)
		if err != nil {
			t.Fatal(err)
		}
		wantMarked(t, res, deltas)
		wantTextForm(t, f.request(t).body)
		noMore(t, f.shows, "capability lookup")
	})
	t.Run("native", func(t *testing.T) {
		f := newFake(t)
		f.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
		f.handle("/api/chat", jsonStatus(http.StatusBadRequest, noToolsError))
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, ToolMode: iop.ToolMode_TOOL_MODE_NATIVE})
		_, _, err := runTarget(t, inst, "gemma:2b", toolChat)
		var ae *adapter.Error
		if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest || !strings.Contains(ae.Message, "does not support tools") {
			t.Fatalf("err = %v, want Ollama's refusal", err)
		}
		f.request(t)
		noMore(t, f.reqs, "retry")
		noMore(t, f.shows, "capability lookup")
	})
	t.Run("unknown", func(t *testing.T) {
		_, err := New(&iop.AdapterConfig{Type: TypeName, ToolMode: iop.ToolMode(42)}, adapter.Env{Getenv: func(string) string { return "" }})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "tool_mode") {
			t.Fatalf("New = %v, want tool_mode refused", err)
		}
	})
}

// A lookup that fails or hangs leaves the run native, bounded by the
// lookup timeout, and is not repeated per request. The lookups are counted
// as the adapter sends them: the short timeout of the hanging case may end
// one before it reaches the fake server on a loaded machine.
func TestTextToolsLookupFailureIsNative(t *testing.T) {
	for name, c := range map[string]struct {
		show    http.HandlerFunc
		timeout time.Duration
	}{
		"hangs":   {func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, 50 * time.Millisecond},
		"500":     {jsonStatus(http.StatusInternalServerError, `{"error":"boom"}`), toolLookupTimeout},
		"garbage": {jsonStatus(http.StatusOK, `<html>proxy</html>`), toolLookupTimeout},
	} {
		t.Run(name, func(t *testing.T) {
			old := toolLookupTimeout
			toolLookupTimeout = c.timeout
			t.Cleanup(func() { toolLookupTimeout = old })
			f := newFake(t)
			f.handle("/api/show", c.show)
			f.handle("/api/chat", ndjson(chatLineToolCall, chatLineToolDone))
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			shows := countShows(inst)
			for range 2 {
				if _, _, err := runTarget(t, inst, "llama3.2", toolChat); err != nil {
					t.Fatal(err)
				}
				if _, ok := decodeBody(t, f.request(t).body)["tools"]; !ok {
					t.Fatal("tools not sent natively after a failed lookup")
				}
			}
			if n := shows.Load(); n != 1 {
				t.Fatalf("%d capability lookups, want 1 within toolLookupRetry", n)
			}
		})
	}
}

// countShows counts the /api/show requests inst sends.
func countShows(inst *Instance) *atomic.Int32 {
	n := new(atomic.Int32)
	next := inst.client.Transport
	inst.client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/api/show" {
			n.Add(1)
		}
		return next.RoundTrip(r)
	})
	return n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// tool_choice none to a model without tools: the history goes as text,
// with no instruction, and the run is not marked.
func TestTextToolsChoiceNone(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
	f.handle("/api/chat", ndjson(chatLineThe, chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	in := strings.TrimSuffix(toolChat, "}") + `,"tool_choice":"none"}`
	res, _, err := runTarget(t, inst, "gemma:2b", in)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.Metadata[adapter.MetaTextToolFallback]; ok {
		t.Fatalf("metadata %v", res.Metadata)
	}
	m := decodeBody(t, f.request(t).body)
	msgs := m["messages"].([]any)
	if _, ok := m["tools"]; ok || msgs[0].(map[string]any)["content"] != "Be terse." || msgs[3].(map[string]any)["role"] != "user" {
		t.Fatalf("body %s", asJSON(t, m))
	}
}

// Reconfigure forgets what the old server said about its models.
func TestTextToolsReconfigureForgets(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
	f.handle("/api/chat", ndjson(textCallLines...))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	if _, _, err := runTarget(t, inst, "gemma:2b", toolChat); err != nil {
		t.Fatal(err)
	}
	f.show(t)
	f.request(t)
	if err := inst.Reconfigure(&iop.AdapterConfig{Type: TypeName, BaseUrl: f.URL}); err != nil {
		t.Fatal(err)
	}
	f.handle("/api/show", jsonStatus(http.StatusOK, showTools))
	f.handle("/api/chat", ndjson(chatLineToolCall, chatLineToolDone))
	if _, _, err := runTarget(t, inst, "gemma:2b", toolChat); err != nil {
		t.Fatal(err)
	}
	f.show(t)
	if _, ok := decodeBody(t, f.request(t).body)["tools"]; !ok {
		t.Fatal("answer from before Reconfigure still used")
	}
}

// Only Ollama's refusal of tools starts the text form: not another missing
// capability (even of a model whose name says "tools"), a missing model,
// or a proxy's refusal.
func TestTextToolsRejectsTools(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   bool
	}{
		{400, noToolsError, true},
		{400, `{"error":"gemma:2b does not support tools\nthinking"}`, true},
		{400, `{"error":"tools-tuned:7b does not support thinking"}`, false},
		{400, `{"error":"invalid tools"}`, false},
		{404, `{"error":"model \"gemma:2b\" not found, try pulling it first"}`, false},
		{403, `{"error":"gemma:2b does not support tools"}`, false},
		{500, noToolsError, false}, // only Ollama's 400 is that refusal
		{400, `{"error":"Gemma:2B Does Not Support Tools"}`, true},
	}
	for _, c := range cases {
		f := newFake(t)
		f.handle("/api/chat", jsonStatus(c.status, c.body))
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, ToolMode: iop.ToolMode_TOOL_MODE_NATIVE})
		_, _, err := runTarget(t, inst, "gemma:2b", toolChat)
		if got := rejectsTools(err); got != c.want {
			t.Errorf("%d %s: rejectsTools = %v, want %v (err %v)", c.status, c.body, got, c.want, err)
		}
	}
}

// The cache holds at most maxToolSupportEntries models.
func TestTextToolsCacheBound(t *testing.T) {
	var c toolSupportCache
	now := time.Now()
	for i := range maxToolSupportEntries + 10 {
		c.put(0, fmt.Sprint("m", i), false, time.Minute, now)
	}
	if n := len(c.entries); n != maxToolSupportEntries {
		t.Fatalf("%d entries, want %d", n, maxToolSupportEntries)
	}
	if e, ok := c.entries[fmt.Sprint("m", maxToolSupportEntries+9)]; !ok || e.native {
		t.Fatal("newest entry missing")
	}
	c.put(c.gen+1, "stale", false, time.Minute, now)
	if _, ok := c.entries["stale"]; ok {
		t.Fatal("an answer from another generation was stored")
	}
}

// show returns the next /api/show request or fails after 5s.
func (f *fakeOllama) show(t *testing.T) captured {
	t.Helper()
	select {
	case c := <-f.shows:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no capability lookup reached the fake server")
		return captured{}
	}
}

func readBody(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

// A run for a model whose lookup is under way waits for that lookup rather
// than asking Ollama again, and goes native if its own context ends first.
func TestTextToolsRunsShareOneLookup(t *testing.T) {
	f := newFake(t)
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	cfg := inst.cfg.Load()
	setToolLookupTimeout(t, time.Minute) // the wait ends by the lookup, not the budget
	l := underWay(inst, "gemma:2b")

	got := make(chan bool, 1)
	go func() { got <- inst.nativeTools(context.Background(), cfg, "gemma:2b") }() // Owner: this test; ends when l.done closes.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if !inst.nativeTools(ctx, cfg, "gemma:2b") {
		t.Error("a run whose context ended while waiting did not go native")
	}
	l.native = false
	close(l.done)
	select {
	case native := <-got:
		if native {
			t.Error("the waiting run did not take the shared answer")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting run did not return")
	}
	noMore(t, f.shows, "second lookup")
}

// A refusal that arrives after a Reconfigure is not remembered for the
// new server: its next run tries native tools again.
func TestTextToolsRefusalAcrossReconfigure(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusOK, showNoCapabilities))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	textAnswer := ndjson(textCallLines...)
	f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(string(readBody(r)), `"tools":`) {
			textAnswer(w, r)
			return
		}
		if err := inst.Reconfigure(&iop.AdapterConfig{Type: TypeName, BaseUrl: f.URL}); err != nil {
			t.Error(err)
		}
		jsonStatus(http.StatusBadRequest, noToolsError)(w, r)
	})
	for range 2 {
		if _, _, err := runTarget(t, inst, "gemma:2b", toolChat); err != nil {
			t.Fatal(err)
		}
		if _, ok := decodeBody(t, f.request(t).body)["tools"]; !ok {
			t.Fatal("run after a Reconfigure did not try native tools first")
		}
		wantTextForm(t, f.request(t).body)
	}
}
