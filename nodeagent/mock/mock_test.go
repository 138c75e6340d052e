package mock

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/iop-gateway/iop/internal/testinput"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// recSink records deltas; it is safe for the concurrent reads tests make.
type recSink struct {
	mu     sync.Mutex
	deltas []string
	first  chan struct{} // closed on the first delta
	once   sync.Once
	err    error
}

func newSink() *recSink { return &recSink{first: make(chan struct{})} }

func (s *recSink) Delta(text string) error {
	s.mu.Lock()
	s.deltas = append(s.deltas, text)
	s.mu.Unlock()
	s.once.Do(func() { close(s.first) })
	return s.err
}

func (s *recSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deltas...)
}

func newMock(t *testing.T, settings map[string]string) adapter.Instance {
	t.Helper()
	inst, err := New(&iop.AdapterConfig{Name: "m", Type: TypeName, Settings: settings}, adapter.Env{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return inst
}

func run(t *testing.T, inst adapter.Instance, op iop.RunOperation, input string) (*adapter.Result, []string, error) {
	t.Helper()
	sink := newSink()
	res, err := inst.Run(context.Background(), &iop.RunRequest{Operation: op, Input: testinput.For(op, input)}, sink)
	return res, sink.got(), err
}

func TestChatEchoSplitsWordsAndCountsUsage(t *testing.T) {
	inst := newMock(t, nil)
	input := `{"messages":[
		{"role":"system","content":"be brief"},
		{"role":"user","content":"  hello   big\tworld \n"}]}`
	res, deltas, err := run(t, inst, adapter.OpChat, input)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"hello", " big", " world"}
	if !slices.Equal(deltas, want) {
		t.Fatalf("deltas = %q, want %q", deltas, want)
	}
	if got := strings.Join(deltas, ""); got != "hello big world" {
		t.Fatalf("joined = %q", got)
	}
	if res.FinishReason != "stop" {
		t.Fatalf("finish = %q", res.FinishReason)
	}
	// 2 system words + 3 user words.
	assertUsage(t, res.Usage, 5, 3)
}

func TestChatUsesLastUserMessageOnly(t *testing.T) {
	inst := newMock(t, nil)
	input := `{"messages":[
		{"role":"user","content":"first question"},
		{"role":"assistant","content":"an answer"},
		{"role":"user","content":"second one"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c","content":"tool output"},
		{"role":"system","content":"late system"}]}`
	res, deltas, err := run(t, inst, adapter.OpChat, input)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := []string{"second", " one"}; !slices.Equal(deltas, want) {
		t.Fatalf("deltas = %q, want %q", deltas, want)
	}
	assertUsage(t, res.Usage, 2+2+2+2+2, 2)
}

func TestChatArrayContentParts(t *testing.T) {
	inst := newMock(t, nil)
	input := `{"messages":[{"role":"user","content":[
		{"type":"text","text":"look at"},
		{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
		{"type":"text","text":"this picture"}]}]}`
	res, deltas, err := run(t, inst, adapter.OpChat, input)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := strings.Join(deltas, ""); got != "look at this picture" {
		t.Fatalf("joined = %q", got)
	}
	assertUsage(t, res.Usage, 4, 4)
}

func TestChatWithoutUserMessageRepliesEmpty(t *testing.T) {
	inst := newMock(t, nil)
	for name, input := range map[string]string{
		"no messages":  `{"messages":[]}`,
		"no user":      `{"messages":[{"role":"system","content":"x y"}]}`,
		"blank user":   `{"messages":[{"role":"user","content":"   "}]}`,
		"null content": `{"messages":[{"role":"user","content":null}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			res, deltas, err := run(t, inst, adapter.OpChat, input)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !slices.Equal(deltas, []string{EmptyReply}) {
				t.Fatalf("deltas = %q", deltas)
			}
			if res.Usage.CompletionTokens != 1 {
				t.Fatalf("completion tokens = %d", res.Usage.CompletionTokens)
			}
		})
	}
}

func TestBadInputIsInvalidRequest(t *testing.T) {
	inst := newMock(t, nil)
	cases := []struct {
		op iop.RunOperation
		in *iop.RunInput
	}{
		{adapter.OpEmbedding, nil},
		{adapter.OpEmbedding, &iop.RunInput{}},
	}
	for _, c := range cases {
		sink := newSink()
		_, err := inst.Run(context.Background(), &iop.RunRequest{Operation: c.op, Input: c.in}, sink)
		var ae *adapter.Error
		if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest {
			t.Errorf("%s %v: err = %v, want invalid_request", c.op, c.in, err)
		}
		if d := sink.got(); len(d) != 0 {
			t.Errorf("%s %v: deltas before validation error: %q", c.op, c.in, d)
		}
	}
}

func TestUnsupportedOperation(t *testing.T) {
	_, _, err := run(t, newMock(t, nil), iop.RunOperation(99), `{}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUnsupported || !errors.Is(err, adapter.ErrUnsupported) {
		t.Fatalf("err = %v", err)
	}
	if err := newMock(t, nil).Tunnel(context.Background(), &iop.ProviderTunnelRequest{}, nil); !errors.Is(err, adapter.ErrUnsupported) {
		t.Fatalf("Tunnel err = %v", err)
	}
}

func TestCompletionEchoesPrompt(t *testing.T) {
	inst := newMock(t, nil)
	res, deltas, err := run(t, inst, adapter.OpCompletion, `{"prompt":["once upon a time"]}`)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := []string{"once", " upon", " a", " time"}; !slices.Equal(deltas, want) {
		t.Fatalf("deltas = %q", deltas)
	}
	assertUsage(t, res.Usage, 4, 4)

	_, deltas, err = run(t, inst, adapter.OpCompletion, `{"prompt":"solo"}`)
	if err != nil || !slices.Equal(deltas, []string{"solo"}) {
		t.Fatalf("deltas = %q, err = %v", deltas, err)
	}
}

func TestDelayAndCancelReturnPromptly(t *testing.T) {
	// A delay long enough that only cancellation can end the run in time.
	inst := newMock(t, map[string]string{SettingDelayMS: "60000"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := newSink()
	done := make(chan error, 1)
	go func() {
		_, err := inst.Run(ctx, &iop.RunRequest{Operation: adapter.OpChat, Input: testinput.Chat(`{"messages":[{"role":"user","content":"a b c"}]}`)}, sink)
		done <- err
	}()
	select {
	case <-sink.first:
	case <-time.After(5 * time.Second):
		t.Fatal("first delta never arrived")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Run did not return within 1s of cancel")
	}
	if got := sink.got(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("deltas = %q", got)
	}
}

func TestDelayPacesDeltas(t *testing.T) {
	inst := newMock(t, map[string]string{SettingDelayMS: "20"})
	start := time.Now()
	_, deltas, err := run(t, inst, adapter.OpChat, `{"messages":[{"role":"user","content":"a b c"}]}`)
	if err != nil || len(deltas) != 3 {
		t.Fatalf("deltas = %q, err = %v", deltas, err)
	}
	// Two pauses between three deltas; a lower bound only, never an upper one.
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Fatalf("elapsed %v, want >= 40ms", el)
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sink := newSink()
	_, err := newMock(t, nil).Run(ctx, &iop.RunRequest{Operation: adapter.OpChat, Input: testinput.Chat(`{"messages":[]}`)}, sink)
	if !errors.Is(err, context.Canceled) || len(sink.got()) != 0 {
		t.Fatalf("err = %v, deltas = %q", err, sink.got())
	}
}

func TestSinkErrorStopsRun(t *testing.T) {
	gone := errors.New("stream gone")
	sink := newSink()
	sink.err = gone
	_, err := newMock(t, nil).Run(context.Background(),
		&iop.RunRequest{Operation: adapter.OpChat, Input: testinput.Chat(`{"messages":[{"role":"user","content":"a b"}]}`)}, sink)
	if !errors.Is(err, gone) || len(sink.got()) != 1 {
		t.Fatalf("err = %v, deltas = %q", err, sink.got())
	}
}

func TestFailTrigger(t *testing.T) {
	inst := newMock(t, map[string]string{SettingFailTrigger: "please fail now"})
	_, deltas, err := run(t, inst, adapter.OpChat, `{"messages":[{"role":"user","content":"please fail now"}]}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || ae.Message != FailureMessage {
		t.Fatalf("err = %v", err)
	}
	if !slices.Equal(deltas, []string{"please"}) {
		t.Fatalf("deltas = %q, want exactly the first", deltas)
	}
	// Not an exact match: no failure.
	if _, _, err := run(t, inst, adapter.OpChat, `{"messages":[{"role":"user","content":"please fail now!"}]}`); err != nil {
		t.Fatalf("near miss failed: %v", err)
	}
	// Only the last user message counts.
	if _, _, err := run(t, inst, adapter.OpChat, `{"messages":[{"role":"user","content":"please fail now"},{"role":"user","content":"ok"}]}`); err != nil {
		t.Fatalf("earlier trigger failed: %v", err)
	}
}

func TestEmbeddingsDeterministic(t *testing.T) {
	inst := newMock(t, nil)
	res, deltas, err := run(t, inst, adapter.OpEmbedding, `{"input":["alpha beta","gamma","alpha beta"]}`)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(deltas) != 0 {
		t.Fatalf("embedding emitted deltas %q", deltas)
	}
	var vecs [][]float64
	if err := json.Unmarshal(res.Output, &vecs); err != nil {
		t.Fatalf("output: %v", err)
	}
	if len(vecs) != 3 {
		t.Fatalf("got %d vectors, want 3", len(vecs))
	}
	for i, v := range vecs {
		if len(v) != EmbeddingDims {
			t.Fatalf("vector %d has %d dims", i, len(v))
		}
		var n float64
		for _, x := range v {
			n += x * x
		}
		if math.Abs(n-1) > 1e-9 {
			t.Fatalf("vector %d norm^2 = %v", i, n)
		}
	}
	if !slices.Equal(vecs[0], vecs[2]) || slices.Equal(vecs[0], vecs[1]) {
		t.Fatalf("same text must give same vector, different text a different one")
	}
	assertUsage(t, res.Usage, 5, 0)

	// Stable across calls and for a single string input.
	res2, _, err := run(t, inst, adapter.OpEmbedding, `{"input":"gamma"}`)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var one [][]float64
	if err := json.Unmarshal(res2.Output, &one); err != nil || len(one) != 1 || !slices.Equal(one[0], vecs[1]) {
		t.Fatalf("single input: %v %v", one, err)
	}
}

func TestBadSettingsRejectedTogether(t *testing.T) {
	_, err := New(&iop.AdapterConfig{Type: "ollama", Settings: map[string]string{SettingDelayMS: "-5"}}, adapter.Env{})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig", err)
	}
	// Both problems are reported in one error.
	if msg := err.Error(); !strings.Contains(msg, "type") || !strings.Contains(msg, SettingDelayMS) {
		t.Fatalf("err = %q, want both problems named", msg)
	}
	for _, v := range []string{"abc", "1.5", "", "99999999999"} {
		if _, err := New(&iop.AdapterConfig{Settings: map[string]string{SettingDelayMS: v}}, adapter.Env{}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("delay_ms %q: err = %v", v, err)
		}
	}
	if _, err := New(nil, adapter.Env{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil config: err = %v", err)
	}
	if _, err := New(&iop.AdapterConfig{Settings: map[string]string{SettingDelayMS: "0", "other": "x"}}, adapter.Env{}); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
}

func TestConcurrentRuns(t *testing.T) {
	inst := newMock(t, map[string]string{SettingDelayMS: "1"})
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sink := newSink()
			_, err := inst.Run(context.Background(), &iop.RunRequest{Operation: adapter.OpChat, Input: testinput.Chat(`{"messages":[{"role":"user","content":"x y z"}]}`)}, sink)
			if err != nil || strings.Join(sink.got(), "") != "x y z" {
				t.Errorf("err = %v, deltas = %q", err, sink.got())
			}
		}()
	}
	wg.Wait()
}

func assertUsage(t *testing.T, u *iop.Usage, prompt, completion int64) {
	t.Helper()
	if u == nil {
		t.Fatal("usage is nil")
	}
	if u.PromptTokens != prompt || u.CompletionTokens != completion || u.TotalTokens != prompt+completion {
		t.Fatalf("usage = %v, want prompt %d completion %d", u, prompt, completion)
	}
}

// max_tokens caps the echo as it caps a model's answer: completion_tokens
// never exceeds it, and a cut answer ends with finish_reason "length"
// (OpenAI, vLLM; the Anthropic surface's stop_reason "max_tokens").
func TestMaxTokensCutsTheEcho(t *testing.T) {
	inst := newMock(t, nil)
	for _, c := range []struct {
		op     iop.RunOperation
		input  string
		want   []string
		finish string
	}{
		{adapter.OpChat, `{"max_tokens":2,"messages":[{"role":"user","content":"one two three four"}]}`, []string{"one", " two"}, "length"},
		{adapter.OpChat, `{"max_completion_tokens":1,"messages":[{"role":"user","content":"one two"}]}`, []string{"one"}, "length"},
		{adapter.OpChat, `{"max_tokens":2,"messages":[{"role":"user","content":"one two"}]}`, []string{"one", " two"}, "stop"},
		{adapter.OpChat, `{"max_tokens":1,"messages":[{"role":"user","content":"  "}]}`, []string{EmptyReply}, "stop"},
		{adapter.OpCompletion, `{"max_tokens":3,"prompt":"once upon a time there"}`, []string{"once", " upon", " a"}, "length"},
	} {
		res, deltas, err := run(t, inst, c.op, c.input)
		if err != nil {
			t.Fatalf("%s: %v", c.input, err)
		}
		if !slices.Equal(deltas, c.want) || res.FinishReason != c.finish {
			t.Errorf("%s: deltas %q finish %q, want %q %q", c.input, deltas, res.FinishReason, c.want, c.finish)
		}
		if res.Usage.CompletionTokens != int64(len(c.want)) {
			t.Errorf("%s: completion_tokens %d, want %d", c.input, res.Usage.CompletionTokens, len(c.want))
		}
	}
}
