package openaicompat

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The text tool-call instruction states the caller's tool_choice and
// parallel_tool_calls, byte for byte as the upstream receives it: a named
// function lists only that tool and forbids the others, required asks for
// a call, parallel_tool_calls false allows a single block, and tool_choice
// none reaches a text-mode backend without tools and without instruction
// (it used to get the native tools it refuses, and every instruction said
// "You may make several calls" whatever the caller asked).

const twoTools = `[` +
	`{"type":"function","function":{"name":"get_weather","description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},` +
	`{"type":"function","function":{"name":"get_time","description":"Local time in a time zone","parameters":{"type":"object","properties":{"tz":{"type":"string"}}}}}]`

// instructionHead is the instruction up to the line that says how many
// calls an answer may make.
const instructionHead = "# Tools\n\n" +
	"You can call the tools listed below. To call a tool, answer with one block per call, exactly in this form, with the arguments as a JSON object that matches the tool's parameters schema:\n" +
	`<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>` + "\n" +
	"For example, a call to a tool named get_weather looks like:\n" +
	`<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>` + "\n"

const (
	severalCalls = "You may make several calls, one block each."
	oneCall      = "Make at most one call in this answer, a single block; you get its result before you call again."
	toolsTail    = " Call only the tools listed here. Tool results come back in <tool_response> blocks.\n\nAvailable tools:\n"
	weatherDoc   = "\n## get_weather\nDescription: Current weather for a city\n" +
		`Parameters (JSON schema): {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}` + "\n"
	timeDoc = "\n## get_time\nDescription: Local time in a time zone\n" +
		`Parameters (JSON schema): {"type":"object","properties":{"tz":{"type":"string"}}}` + "\n"
)

// rawRecorder keeps every upstream request body as sent.
type rawRecorder struct {
	mu     sync.Mutex
	bodies []string
}

func (r *rawRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// textUpstream answers every chat request with one short text answer and
// records the request bodies byte for byte.
func textUpstream(t *testing.T, rec *rawRecorder) string {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request: %v", err)
		}
		rec.mu.Lock()
		rec.bodies = append(rec.bodies, string(b))
		rec.mu.Unlock()
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"role":"assistant","content":"ok"}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":""}`, "stop"))
		sseWrite(t, w, vllmDone)
	})
	return srv.URL
}

// upstreamBody is the exact body the adapter posts for a conversation of
// one user message, given the system message's content ("" for none).
func upstreamBody(system string) string {
	str := func(s string) string {
		b, _ := json.Marshal(s) // the adapter's body is encoded by encoding/json too
		return string(b)
	}
	msgs := `{"role":"user","content":"Weather or time in Paris?"}`
	if system != "" {
		msgs = `{"role":"system","content":` + str(system) + `},` + msgs
	}
	return `{"messages":[` + msgs + `],"model":"m","stream":true,"stream_options":{"include_usage":true}}`
}

func TestTextToolInstructionHonoursToolChoice(t *testing.T) {
	for _, c := range []struct {
		name   string
		extra  string // members after tools
		system string // "" : no system message at all
		marked bool
	}{{
		name:   "auto (unchanged)",
		extra:  ``,
		system: instructionHead + severalCalls + toolsTail + weatherDoc + timeDoc,
		marked: true,
	}, {
		name:   "named function",
		extra:  `,"tool_choice":{"type":"function","function":{"name":"get_time"}}`,
		system: instructionHead + severalCalls + toolsTail + timeDoc + "\nYou must call the tool get_time in this answer, and no other tool.\n",
		marked: true,
	}, {
		name:   "named function, parallel_tool_calls false",
		extra:  `,"tool_choice":{"type":"function","function":{"name":"get_time"}},"parallel_tool_calls":false`,
		system: instructionHead + oneCall + toolsTail + timeDoc + "\nYou must call the tool get_time exactly once in this answer, and no other tool.\n",
		marked: true,
	}, {
		name:   "required",
		extra:  `,"tool_choice":"required"`,
		system: instructionHead + severalCalls + toolsTail + weatherDoc + timeDoc + "\nYou must call at least one tool in this answer.\n",
		marked: true,
	}, {
		name:   "required, parallel_tool_calls false",
		extra:  `,"tool_choice":"required","parallel_tool_calls":false`,
		system: instructionHead + oneCall + toolsTail + weatherDoc + timeDoc + "\nYou must call exactly one tool in this answer.\n",
		marked: true,
	}, {
		name:   "auto, parallel_tool_calls false",
		extra:  `,"tool_choice":"auto","parallel_tool_calls":false`,
		system: instructionHead + oneCall + toolsTail + weatherDoc + timeDoc,
		marked: true,
	}, {
		name:   "parallel_tool_calls true",
		extra:  `,"parallel_tool_calls":true`,
		system: instructionHead + severalCalls + toolsTail + weatherDoc + timeDoc,
		marked: true,
	}, {
		name:   "none",
		extra:  `,"tool_choice":"none","parallel_tool_calls":false`,
		system: "",
		marked: false,
	}} {
		t.Run(c.name, func(t *testing.T) {
			rec := &rawRecorder{}
			cfg := testConfig(textUpstream(t, rec))
			cfg.ToolMode = iop.ToolMode_TOOL_MODE_TEXT
			in := newTestInstance(t, TypeOpenAICompat, cfg)
			input := testinput.Chat(`{"messages":[{"role":"user","content":"Weather or time in Paris?"}],"tools":` + twoTools + c.extra + `}`)
			res, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: input}, &fakeRunSink{})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			bodies := rec.all()
			if len(bodies) != 1 {
				t.Fatalf("%d upstream requests, want 1", len(bodies))
			}
			if want := upstreamBody(c.system); bodies[0] != want {
				t.Errorf("upstream body\n got: %s\nwant: %s", bodies[0], want)
			}
			if got := res.Metadata[adapter.MetaTextToolFallback] == "true"; got != c.marked {
				t.Errorf("marked %v, want %v (metadata %v)", got, c.marked, res.Metadata)
			}
		})
	}
}

// tool_choice none in auto mode still tries the tools natively (the
// upstream is told not to call them), and a backend that refuses native
// tools gets the text form without instruction instead of failing the run.
func TestToolChoiceNoneFallsBackWithoutInstruction(t *testing.T) {
	rec := &recorder{}
	in := newTestInstance(t, TypeVLLM, testConfig(toolFallbackServer(t, rec, vllmToolChoiceError)))
	input := testinput.Chat(`{"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":` + weatherTools + `,"tool_choice":"none"}`)
	res, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: input}, &fakeRunSink{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if rec.count() != 2 {
		t.Fatalf("%d upstream requests, want the native attempt and the text retry", rec.count())
	}
	if first := rec.body(0); first["tools"] == nil || first["tool_choice"] != "none" {
		t.Errorf("native attempt %v", first)
	}
	second := rec.body(1)
	for _, k := range []string{"tools", "tool_choice", "parallel_tool_calls"} {
		if _, ok := second[k]; ok {
			t.Errorf("retry still has %q", k)
		}
	}
	if msgs := second["messages"].([]any); len(msgs) != 1 {
		t.Errorf("retry messages %v, want the user message alone", msgs)
	}
	if _, ok := res.Metadata[adapter.MetaTextToolFallback]; ok {
		t.Errorf("a run without instruction is marked: %v", res.Metadata)
	}
}
