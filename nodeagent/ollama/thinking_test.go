package ollama

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Lines of a thinking model (qwen3) as Ollama writes them: json.Marshal of
// api.ChatResponse / api.GenerateResponse, message.thinking (or thinking)
// beside an empty content while the model thinks, and one line carrying
// both where its parser switches from thinking to the answer.
const (
	chatLineThink1    = `{"model":"qwen3","created_at":"2025-05-29T09:35:56.836222Z","message":{"role":"assistant","content":"","thinking":"Okay, the user"},"done":false}`
	chatLineThink2    = `{"model":"qwen3","created_at":"2025-05-29T09:35:56.857389Z","message":{"role":"assistant","content":"","thinking":" asks about the sky."},"done":false}`
	chatLineSwitch    = `{"model":"qwen3","created_at":"2025-05-29T09:35:57.012231Z","message":{"role":"assistant","content":"Rayleigh","thinking":" Done."},"done":false}`
	chatLineAnswer    = `{"model":"qwen3","created_at":"2025-05-29T09:35:57.033452Z","message":{"role":"assistant","content":" scattering."},"done":false}`
	chatLineThinkDone = `{"model":"qwen3","created_at":"2025-05-29T09:35:57.054117Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":1523400125,"load_duration":20125458,"prompt_eval_count":15,"prompt_eval_duration":110432042,"eval_count":44,"eval_duration":1391825167}`

	genLineThink = `{"model":"qwen3","created_at":"2025-05-29T09:40:11.102334Z","response":"","thinking":"Hmm, a haiku.","done":false}`
	genLineAns   = `{"model":"qwen3","created_at":"2025-05-29T09:40:11.201187Z","response":"Blue","done":false}`
	genLineDone  = `{"model":"qwen3","created_at":"2025-05-29T09:40:11.222651Z","response":"","done":true,"done_reason":"stop","total_duration":412218083,"load_duration":18316750,"prompt_eval_count":12,"prompt_eval_duration":30118125,"eval_count":9,"eval_duration":362908208}`
)

// reasonSink records deltas and reasoning in the order they came, as
// "d:" and "r:" entries (adapter.ReasoningSink).
type reasonSink struct {
	mu        sync.Mutex
	events    []string
	reasonErr error // returned by Reasoning when set
}

func (s *reasonSink) Delta(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, "d:"+text)
	return nil
}

func (s *reasonSink) Reasoning(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, "r:"+text)
	return s.reasonErr
}

func (s *reasonSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

var _ adapter.ReasoningSink = (*reasonSink)(nil)

func TestChatThinkingRelayedAsReasoning(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineThink1, chatLineThink2, chatLineSwitch, chatLineAnswer, chatLineThinkDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})

	sink := &reasonSink{}
	res, err := inst.Run(context.Background(), &iop.RunRequest{
		Operation: adapter.OpChat, Target: "qwen3", Input: testinput.Chat(simpleChat),
	}, sink)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"r:Okay, the user", "r: asks about the sky.", "r: Done.", "d:Rayleigh", "d: scattering."}
	if got := sink.got(); !slices.Equal(got, want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
	if res.FinishReason != "stop" || res.Usage.GetCompletionTokens() != 44 {
		t.Fatalf("result = %+v", res)
	}
}

// A sink that takes no reasoning gets the answer alone: thinking is never
// folded into the text.
func TestChatThinkingNeverInDeltas(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineThink1, chatLineSwitch, chatLineAnswer, chatLineThinkDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	_, deltas, err := runChat(t, inst, simpleChat)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !slices.Equal(deltas, []string{"Rayleigh", " scattering."}) {
		t.Fatalf("deltas = %q", deltas)
	}
}

func TestGenerateThinkingRelayedAsReasoning(t *testing.T) {
	if got, want := generateEvents(t, genLineThink, genLineAns, genLineDone), []string{"r:Hmm, a haiku.", "d:Blue"}; !slices.Equal(got, want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
}

// generateEvents runs a completion against an Ollama answering lines on
// /api/generate and returns the events its sink took ("r:" reasoning,
// "d:" deltas).
func generateEvents(t *testing.T, lines ...string) []string {
	t.Helper()
	f := newFake(t)
	f.handle("/api/generate", ndjson(lines...))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	sink := &reasonSink{}
	if _, err := inst.Run(context.Background(), &iop.RunRequest{
		Operation: adapter.OpCompletion, Target: "qwen3", Input: &iop.RunInput{Prompt: "a haiku"},
	}, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sink.got()
}

// The run's stream going away while the model thinks stops the run, as it
// does while the model answers: the rest is not read.
func TestReasoningSinkErrorStopsRun(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", ndjson(chatLineThink1, chatLineThink2, chatLineAnswer, chatLineThinkDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	gone := errors.New("stream gone")
	sink := &reasonSink{reasonErr: gone}
	_, err := inst.Run(context.Background(), &iop.RunRequest{
		Operation: adapter.OpChat, Target: "qwen3", Input: testinput.Chat(simpleChat),
	}, sink)
	if !errors.Is(err, gone) {
		t.Fatalf("err = %v, want the sink's", err)
	}
	if got := sink.got(); !slices.Equal(got, []string{"r:Okay, the user"}) {
		t.Fatalf("events = %q", got)
	}
}

// effortThink is a request body's reasoning members and the think they
// become.
type effortThink struct {
	extra string // members added to the request body
	think string // "" means absent
}

// effortThinkCases are the reasoning members every request maps to think
// alike (a new slice each call).
func effortThinkCases() []effortThink {
	return []effortThink{
		{``, ``},
		{`,"reasoning_effort":null`, ``},
		{`,"reasoning_effort":"none"`, `false`},
		{`,"reasoning_effort":"minimal"`, `"low"`},
		{`,"reasoning_effort":"low"`, `"low"`},
		{`,"reasoning_effort":"medium"`, `"medium"`},
		{`,"reasoning_effort":"high"`, `"high"`},
		{`,"reasoning_effort":"max"`, `"max"`},
		{`,"reasoning_effort":"xhigh"`, `"max"`},
		{`,"reasoning_effort":"ultra"`, `"max"`},
		{`,"reasoning":{"effort":"high"}`, `"high"`},
		{`,"reasoning":{"effort":"low"},"reasoning_effort":"high"`, `"low"`},
		// As in Ollama: a reasoning object wins even without an effort.
		{`,"reasoning":{},"reasoning_effort":"high"`, ``},
	}
}

// wantThink fails unless think (ok: present in the body sent) is want as
// JSON, or absent when want is "".
func wantThink(t *testing.T, think any, ok bool, want string) {
	t.Helper()
	if want == "" {
		if ok {
			t.Fatalf("think = %v, want none", think)
		}
		return
	}
	wantJSON(t, "think", think, want)
}

// reasoning_effort (or reasoning.effort) becomes /api/chat's think exactly
// as Ollama's own /v1/chat/completions maps it (openai/openai.go,
// thinkFromReasoningEffort); without one no think is sent.
func TestReasoningEffortMapsToThink(t *testing.T) {
	cases := append(effortThinkCases(),
		effortThink{`,"user":"u-1","logprobs":true`, ``})
	for _, c := range cases {
		t.Run(c.extra, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/chat", ndjson(chatLineThe, chatLineFinal))
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			if _, _, err := runChat(t, inst, `{"messages":[{"role":"user","content":"hi"}]`+c.extra+`}`); err != nil {
				t.Fatalf("Run: %v", err)
			}
			body := decodeBody(t, f.request(t).body)
			think, ok := body["think"]
			wantThink(t, think, ok, c.think)
		})
	}
}

// An effort Ollama has no mapping for, or a reasoning member of the wrong
// type, is the caller's error: refused before anything is sent, as Ollama
// refuses it with a 400.
func TestBadReasoningEffortRefused(t *testing.T) {
	for _, extra := range []string{`"reasoning_effort":"extreme"`, `"reasoning_effort":3`, `"reasoning":"high"`} {
		t.Run(extra, func(t *testing.T) {
			f := newFake(t)
			f.handle("/api/chat", ndjson(chatLineThe, chatLineFinal))
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			_, _, err := runChat(t, inst, `{"messages":[{"role":"user","content":"hi"}],`+extra+`}`)
			var ae *adapter.Error
			if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest || strings.Contains(ae.Message, "Go") {
				t.Fatalf("err = %v, want invalid_request", err)
			}
			select {
			case r := <-f.reqs:
				t.Fatalf("request sent upstream: %s", r.body)
			default:
			}
		})
	}
}

// Ollama refuses think for a model that cannot think with a 400 (server/
// routes.go, ChatHandler: c.JSON(http.StatusBadRequest, gin.H{"error":
// fmt.Sprintf("%q does not support thinking", req.Model)})). That is the
// caller's request, not the node's fault: invalid_request with Ollama's
// words, which the edge fails over for no other candidate.
func TestThinkOnModelWithoutThinkingIsInvalidRequest(t *testing.T) {
	f := newFake(t)
	f.handle("/api/chat", jsonStatus(http.StatusBadRequest, `{"error":"\"llama3.2\" does not support thinking"}`))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	_, deltas, err := runChat(t, inst, `{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high"}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest || ae.HTTPStatus != http.StatusBadRequest ||
		ae.Message != `"llama3.2" does not support thinking` {
		t.Fatalf("err = %#v", err)
	}
	if len(deltas) != 0 {
		t.Fatalf("deltas = %q", deltas)
	}
	wantJSON(t, "think", decodeBody(t, f.request(t).body)["think"], `"high"`)
	select {
	case r := <-f.reqs:
		t.Fatalf("request sent again: %s", r.body)
	default:
	}
}
