package ollama

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// refuseNativeTools answers /api/chat as Ollama does for a model without
// tools: the native form is refused with 400, the text form answered.
func refuseNativeTools(t *testing.T) http.HandlerFunc {
	textAnswer := ndjson(textCallLines...)
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := decodeBody(t, readBody(r))["tools"]; ok {
			jsonStatus(http.StatusBadRequest, noToolsError)(w, r)
			return
		}
		textAnswer(w, r)
	}
}

// A run waiting for a lookup whose own run is cancelled mid-lookup asks
// Ollama itself, once, and gets the text form straight away: no native
// attempt refused first.
func TestTextToolsWaiterTakesOverCancelledLookup(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", func(w http.ResponseWriter, r *http.Request) {
		// Told apart by the run that sent it, not by arrival: the server
		// may run the leader's handler after the waiter's.
		if r.Header.Get(leaderHeader) != "" {
			<-r.Context().Done() // the leading run is cancelled while Ollama thinks
			return
		}
		jsonStatus(http.StatusOK, showNoTools)(w, r)
	})
	f.handle("/api/chat", refuseNativeTools(t))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	sent := countShows(inst)
	markLeader(inst)
	// The takeover is timed by the test, not by the runs' budgets.
	setToolLookupTimeout(t, time.Minute)
	waiting := make(chan struct{}, 1)
	setToolWaitHook(t, func() { waiting <- struct{}{} })

	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), leadingRun{}, true))
	defer cancel()
	leader := make(chan error, 1)
	go func() { // Owner: this test; ends once ctx is cancelled.
		_, err := inst.Run(ctx, &iop.RunRequest{Operation: adapter.OpChat, Target: "gemma:2b", Input: testinput.Chat(toolChat)}, newSink())
		leader <- err
	}()
	f.show(t) // the leader's lookup is under way
	type outcome struct {
		res    *adapter.Result
		deltas []string
		err    error
	}
	waiter := make(chan outcome, 1)
	go func() { // Owner: this test; ends with its run.
		res, deltas, err := runTarget(t, inst, "gemma:2b", toolChat)
		waiter <- outcome{res, deltas, err}
	}()
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("the second run did not wait for the lookup under way")
	}
	cancel()
	if err := <-leader; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v, want its cancellation", err)
	}
	o := <-waiter
	if o.err != nil {
		t.Fatal(o.err)
	}
	wantMarked(t, o.res, o.deltas)
	wantTextForm(t, f.request(t).body)
	noMore(t, f.reqs, "request (a native attempt)")
	f.show(t)
	if n := sent.Load(); n != 2 {
		t.Fatalf("%d lookups sent, want the leader's and one more", n)
	}
}

// A waiter whose budget (toolLookupTimeout from its first wait) ends while
// the lookup it took over is under way goes native, and a lookup that ran
// on what was left of a budget is not remembered as a failure.
func TestTextToolsTakeOverWithinBudget(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	cfg := inst.cfg.Load()
	old := toolLookupTimeout
	setToolLookupTimeout(t, 200*time.Millisecond)
	// The run leading the lookup is cancelled as soon as this run waits.
	abandonOnWait(t, inst, "gemma:2b", underWay(inst, "gemma:2b"), nil)

	start := time.Now()
	if !inst.nativeTools(context.Background(), cfg, "gemma:2b") {
		t.Fatal("a run out of budget did not go native")
	}
	if d := time.Since(start); d > old {
		t.Fatalf("the run waited %v, past its budget", d)
	}
	f.show(t) // it did take the lookup over
	if e, ok := entryOf(inst, "gemma:2b"); ok {
		t.Fatalf("a lookup on part of a budget was remembered: %+v", e)
	}
}

// leadingRun is the context key of the run whose requests markLeader marks.
type leadingRun struct{}

// leaderHeader marks the requests of the run whose context holds leadingRun.
const leaderHeader = "X-Test-Leading-Run"

// markLeader makes inst mark the requests of the run whose context holds
// leadingRun with leaderHeader.
func markLeader(inst *Instance) {
	next := inst.client.Transport
	inst.client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Context().Value(leadingRun{}) != nil {
			r = r.Clone(r.Context())
			r.Header.Set(leaderHeader, "1")
		}
		return next.RoundTrip(r)
	})
}

// observed is an instance whose logs are recorded from debug up.
func observed(t *testing.T, baseURL string) (*Instance, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	inst, err := New(&iop.AdapterConfig{Type: TypeName, BaseUrl: baseURL}, adapter.Env{
		Getenv: func(string) string { return "" }, Logger: zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Close() })
	return inst.(*Instance), logs
}

// A model Ollama does not have (its 404 with a JSON error) is no failed
// lookup: the run goes native without a warning and the client gets
// Ollama's own "not found". A 404 page (a route missing behind a proxy, an
// old server) and other failures still warn.
func TestTextToolsUnknownModelNotWarned(t *testing.T) {
	const notFound = `{"error":"model 'gemma:7b' not found"}`
	const chatNotFound = `{"error":"model \"gemma:7b\" not found, try pulling it first"}`
	for name, c := range map[string]struct {
		show http.HandlerFunc
		warn bool
	}{
		"model not found": {jsonStatus(http.StatusNotFound, notFound), false},
		"route not found": {func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "404 page not found", http.StatusNotFound)
		}, true},
		"500": {jsonStatus(http.StatusInternalServerError, `{"error":"boom"}`), true},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/show", c.show)
			f.handle("/api/chat", jsonStatus(http.StatusNotFound, chatNotFound))
			inst, logs := observed(t, f.URL)
			_, _, err := runTarget(t, inst, "gemma:7b", toolChat)
			var ae *adapter.Error
			if !errors.As(err, &ae) || ae.HTTPStatus != http.StatusNotFound || ae.Message != `model "gemma:7b" not found, try pulling it first` {
				t.Fatalf("err = %v, want Ollama's answer to the chat", err)
			}
			if _, ok := decodeBody(t, f.request(t).body)["tools"]; !ok {
				t.Fatal("tools not sent natively")
			}
			warned := logs.FilterLevelExact(zapcore.WarnLevel).Len()
			if c.warn && warned != 1 || !c.warn && warned != 0 {
				t.Fatalf("%d warnings, want warn=%v: %v", warned, c.warn, logs.All())
			}
			if !c.warn && logs.FilterLevelExact(zapcore.DebugLevel).FilterField(zap.String("target", "gemma:7b")).Len() != 1 {
				t.Fatalf("no debug entry for the unknown model: %v", logs.All())
			}
		})
	}
}

// A show answer as long as a real one (its license alone is kilobytes,
// so Ollama sends it chunked) is read to its end, and its connection
// serves the next lookup. The answer's end is held back until the client
// has read the whole object, so that only a read past the object sees it.
func TestTextToolsLookupReusesConnection(t *testing.T) {
	f := newFake(t)
	long := strings.Replace(showNoTools, `"license":"Gemma Terms of Use\n\nLast modified: February 21, 2024"`,
		`"license":"Gemma Terms of Use\n\n`+strings.Repeat(`Section text of the terms. `, 400)+`"`, 1)
	read := make(chan struct{}, 1) // the client read the object's last byte
	f.handle("/api/show", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = io.WriteString(w, long)
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-r.Context().Done():
		}
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	setToolLookupTimeout(t, time.Minute) // the lookups end by their answers
	wrapBodies(inst, func(body io.ReadCloser) io.ReadCloser {
		return &signalAt{ReadCloser: body, left: len(long), reached: read}
	})
	cfg := inst.cfg.Load()
	for _, model := range []string{"gemma:2b", "gemma:7b"} {
		if inst.nativeTools(context.Background(), cfg, model) {
			t.Fatalf("%s: the answer was not read", model)
		}
	}
	if n := f.conns.Load(); n != 1 {
		t.Fatalf("%d connections for two lookups, want 1", n)
	}
}

// signalAt signals reached once left bytes have been read through it.
type signalAt struct {
	io.ReadCloser
	left    int
	reached chan<- struct{}
}

func (s *signalAt) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if s.left > 0 {
		if s.left -= n; s.left <= 0 {
			s.reached <- struct{}{}
		}
	}
	return n, err
}

// "gemma", "gemma:latest" and the fully qualified name are one model to
// Ollama, and share one lookup.
func TestTextToolsNameFormsShareOneLookup(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
	f.handle("/api/chat", ndjson(textCallLines...))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	shows := countShows(inst)
	runInTextForm(t, f, inst, "gemma", "gemma:latest", "registry.ollama.ai/library/gemma:latest", "library/gemma")
	if n := shows.Load(); n != 1 {
		t.Fatalf("%d lookups, want 1", n)
	}
	// A refusal is remembered under the same key.
	f.handle("/api/show", jsonStatus(http.StatusOK, showNoCapabilities))
	f.handle("/api/chat", refuseNativeTools(t))
	for _, name := range []string{"llama3.2", "llama3.2:latest"} {
		if _, _, err := runTarget(t, inst, name, toolChat); err != nil {
			t.Fatal(err)
		}
	}
	if n := shows.Load(); n != 2 {
		t.Fatalf("%d lookups, want one more for llama3.2", n)
	}
	if _, ok := decodeBody(t, f.request(t).body)["tools"]; !ok {
		t.Fatal("first llama3.2 run not native")
	}
	wantTextForm(t, f.request(t).body)
	wantTextForm(t, f.request(t).body) // llama3.2:latest: straight to the text form
}

func TestModelKey(t *testing.T) {
	wantModelKeys(t, map[string]string{
		"gemma":                            "gemma:latest",
		"gemma:latest":                     "gemma:latest",
		"library/gemma":                    "gemma:latest",
		"library/gemma:latest":             "gemma:latest",
		"registry.ollama.ai/library/gemma": "gemma:latest",
		"registry.ollama.ai/library/gemma:latest": "gemma:latest",
		"gemma:2b":                                          "gemma:2b",
		"registry.ollama.ai/library/gemma:2b":               "gemma:2b",
		"llama3.2:3b-instruct-q4_K_M":                       "llama3.2:3b-instruct-q4_k_m",
		"jmorgan/gemma":                                     "jmorgan/gemma:latest",
		"registry.ollama.ai/jmorgan/gemma:v1":               "jmorgan/gemma:v1",
		"hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M": "hf.co/bartowski/llama-3.2-1b-instruct-gguf:q4_k_m",
		"hf.co/library/gemma":                               "hf.co/library/gemma:latest",
		// A registry with a port: the ":" before the last "/" is no tag.
		"host:5000/ns/model":    "host:5000/ns/model:latest",
		"host:5000/ns/model:v1": "host:5000/ns/model:v1",
		// Case is folded, as Ollama finds names (modelcase33_test.go).
		"Gemma": "gemma:latest",
		// Kept as written: digests, schemes, kinds, too many or empty
		// parts, characters Ollama refuses.
		"gemma@sha256:9c5b1a0b2f6c": "gemma@sha256:9c5b1a0b2f6c",
		"https://host/ns/model":     "https://host/ns/model",
		"ns/skill/model":            "ns/skill/model",
		"a/b/c/d":                   "a/b/c/d",
		"gemma:":                    "gemma:",
		"/gemma":                    "/gemma",
		"library/":                  "library/",
		"":                          "",
		"ns.x/gemma":                "ns.x/gemma",
		"gemma model":               "gemma model",
		"-gemma":                    "-gemma",
		"gemma:-x":                  "gemma:-x",
		strings.Repeat("m", 81):     strings.Repeat("m", 81),
		// "_" may begin and fill a part; every kind is kept as written;
		// each part has its length bound.
		"_gemma":         "_gemma:latest",
		"my_model":       "my_model:latest",
		"ns/agent/model": "ns/agent/model",
		"ns/mcp/model":   "ns/mcp/model",
		"ho!st/ns/model": "ho!st/ns/model",
		"library/gemma:" + strings.Repeat("t", 80):              "gemma:" + strings.Repeat("t", 80),
		"library/gemma:" + strings.Repeat("t", 81):              "library/gemma:" + strings.Repeat("t", 81),
		strings.Repeat("n", 80) + "/gemma":                      strings.Repeat("n", 80) + "/gemma:latest",
		strings.Repeat("n", 81) + "/gemma":                      strings.Repeat("n", 81) + "/gemma",
		strings.Repeat("h", 350) + "/ns/gemma":                  strings.Repeat("h", 350) + "/ns/gemma:latest",
		strings.Repeat("h", 351) + "/ns/gemma":                  strings.Repeat("h", 351) + "/ns/gemma",
		"registry.ollama.ai/library/" + strings.Repeat("m", 81): "registry.ollama.ai/library/" + strings.Repeat("m", 81),
	})
	if n := testing.AllocsPerRun(100, func() { _ = modelKey("registry.ollama.ai/library/gemma:2b") }); n != 0 {
		t.Errorf("%v allocations for a name with its tag", n)
	}
}

// The tool_choice the caller gave reaches a model in the text form as an
// instruction (Ollama has no tool_choice to send natively): required asks
// for a call, a named function lists only that tool and asks for it, and
// parallel_tool_calls false makes it exactly one.
func TestTextToolsChoiceRequiredInTextForm(t *testing.T) {
	const twoTools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},` +
		`{"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}]`
	for name, c := range map[string]struct {
		extra, must string
		tools       []string
	}{
		"required":          {`"tool_choice":"required"`, "You must call at least one tool in this answer.", []string{"get_weather", "get_time"}},
		"required single":   {`"tool_choice":"required","parallel_tool_calls":false`, "You must call exactly one tool in this answer.", []string{"get_weather", "get_time"}},
		"named":             {`"tool_choice":{"type":"function","function":{"name":"get_time"}}`, "You must call the tool get_time in this answer, and no other tool.", []string{"get_time"}},
		"named single":      {`"tool_choice":{"type":"function","function":{"name":"get_time"}},"parallel_tool_calls":false`, "You must call the tool get_time exactly once in this answer, and no other tool.", []string{"get_time"}},
		"auto asks nothing": {`"tool_choice":"auto"`, "", []string{"get_weather", "get_time"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
			f.handle("/api/chat", ndjson(textCallLines...))
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			in := `{"messages":[{"role":"user","content":"Weather in Rome?"}],` + twoTools + `,` + c.extra + `}`
			if _, _, err := runTarget(t, inst, "gemma:2b", in); err != nil {
				t.Fatal(err)
			}
			body := decodeBody(t, f.request(t).body)
			if _, ok := body["tools"]; ok {
				t.Fatal("tools sent natively")
			}
			sys, _ := body["messages"].([]any)[0].(map[string]any)["content"].(string)
			if c.must != "" && !strings.HasSuffix(sys, "\n"+c.must+"\n") || c.must == "" && strings.Contains(sys, "You must") {
				t.Fatalf("instruction %q, want it to end with %q", sys, c.must)
			}
			for _, tool := range []string{"get_weather", "get_time"} {
				if listed := strings.Contains(sys, "\n## "+tool+"\n"); listed != strings.Contains(strings.Join(c.tools, " "), tool) {
					t.Errorf("%s listed: %v, want the tools %v", tool, listed, c.tools)
				}
			}
		})
	}
}

// On the native path tool_choice required is not expressed (Ollama has no
// tool_choice): the tools go as the caller gave them, nothing is added to
// the prompt, and the request is not refused. A named function is offered
// alone (TestToolChoiceFunctionOffersOnlyThatTool).
func TestNativeChoiceRequiredAddsNothing(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineToolCall, chatLineToolDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	in := strings.TrimSuffix(toolChat, "}") + `,"tool_choice":"required"}`
	if _, _, err := runTarget(t, inst, "llama3.2", in); err != nil {
		t.Fatal(err)
	}
	body := decodeBody(t, f.request(t).body)
	if _, ok := body["tool_choice"]; ok {
		t.Fatalf("tool_choice sent to Ollama: %s", asJSON(t, body))
	}
	msgs := body["messages"].([]any)
	if len(msgs) != 5 || msgs[0].(map[string]any)["content"] != "Be terse." {
		t.Fatalf("messages changed: %s", asJSON(t, msgs))
	}
	wantJSON(t, "tools", body["tools"], `[{"type":"function","function":{"name":"get_weather","description":"Current weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`)
}

// An earlier tool call without arguments (empty text, JSON null or none)
// goes to Ollama as the object it wants, natively and in the text form,
// byte for byte. (Arguments of the text "null" are refused natively:
// TestNullToolArgumentsRefused.)
func TestHistoryEmptyArguments(t *testing.T) {
	for _, args := range []string{`""`, `"  "`, `null`} {
		history := `{"messages":[{"role":"user","content":"What time is it?"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_time","arguments":` + args + `}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"12:00"}],` +
			`"tools":[{"type":"function","function":{"name":"get_time"}}]}`
		for name, c := range map[string]struct {
			mode iop.ToolMode
			want string
		}{
			"native": {iop.ToolMode_TOOL_MODE_NATIVE, `"tool_calls":[{"id":"call_1","function":{"name":"get_time","arguments":{}}}]`},
			"text":   {iop.ToolMode_TOOL_MODE_TEXT, `{"role":"assistant","content":"\u003ctool_call\u003e{\"name\":\"get_time\",\"arguments\":{}}\u003c/tool_call\u003e"}`},
		} {
			t.Run(name+" "+args, func(t *testing.T) {
				f := newFake(t)
				f.handle("/api/chat", ndjson(chatLineThe, chatLineFinal))
				inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, ToolMode: c.mode})
				if _, _, err := runTarget(t, inst, "gemma:2b", history); err != nil {
					t.Fatal(err)
				}
				if body := string(f.request(t).body); !strings.Contains(body, c.want) {
					t.Fatalf("body %s\nwant it to hold %s", body, c.want)
				}
			})
		}
	}
}

// modelKey reads target names from callers: it never panics, folding is
// stable (a key is its own key), and a key grows by at most the default
// tag.
func FuzzModelKey(f *testing.F) {
	for _, s := range []string{"gemma", "gemma:2b", "library/gemma", "registry.ollama.ai/library/gemma:latest",
		"host:5000/ns/model:v1", "ns/skill/model", "gemma@sha256:00", "https://h/n/m", "a/b/c/d", "gemma:", ":", "/", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := modelKey(s)
		if again := modelKey(k); again != k {
			t.Fatalf("modelKey(%q) = %q, but modelKey(%q) = %q", s, k, k, again)
		}
		if len(k) > len(s)+len(":"+defaultModelTag) {
			t.Fatalf("modelKey(%q) = %q grew", s, k)
		}
	})
}
