package openaicompat

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// reasonSink records deltas and reasoning in the order they came, as "d:"
// and "r:" entries (adapter.ReasoningSink). Reasoning fails with
// reasonErr once more than failAfter bytes of it arrived (failAfter > 0).
type reasonSink struct {
	mu        sync.Mutex
	events    []string
	reasoned  int
	failAfter int
	reasonErr error
}

var _ adapter.ReasoningSink = (*reasonSink)(nil)

func (s *reasonSink) Delta(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, "d:"+text)
	return nil
}

func (s *reasonSink) Reasoning(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reasoned += len(text)
	if s.failAfter > 0 && s.reasoned > s.failAfter {
		return s.reasonErr
	}
	s.events = append(s.events, "r:"+text)
	return nil
}

func (s *reasonSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// runReasoning runs one chat against an upstream that writes events.
func runReasoning(t *testing.T, sink adapter.RunSink, events ...string) (*adapter.Result, error) {
	t.Helper()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		for _, e := range events {
			sseWrite(t, w, e)
		}
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	return in.Run(context.Background(), &iop.RunRequest{Target: "Qwen/Qwen3-8B", Operation: adapter.OpChat, Stream: true,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"Hi"}]}`)}, sink)
}

// vLLM with a reasoning parser (--reasoning-parser qwen3) streams the
// thinking as delta.reasoning_content, then the answer as content, with one
// delta carrying both at the switch.
func TestStreamReasoningContentRelayed(t *testing.T) {
	sink := &reasonSink{}
	res, err := runReasoning(t, sink,
		vllmChunk(`{"role":"assistant","content":""}`, ""),
		vllmChunk(`{"reasoning_content":"Okay, the user"}`, ""),
		vllmChunk(`{"reasoning_content":" greets me."}`, ""),
		vllmChunk(`{"reasoning_content":"\n","content":"Hello"}`, ""),
		vllmChunk(`{"content":"!"}`, ""),
		vllmChunk(`{"content":""}`, "stop"),
		vllmUsageChunk(9, 12),
		vllmDone)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	want := []string{"r:Okay, the user", "r: greets me.", "r:\n", "d:Hello", "d:!"}
	if got := sink.got(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if res.FinishReason != "stop" || res.Usage.GetCompletionTokens() != 12 {
		t.Fatalf("result %+v", res)
	}
}

// Newer vLLM (and OpenRouter, Ollama's /v1) name it reasoning; vLLM while
// renaming sent both members with the same text, which goes once; two
// different texts both go, reasoning_content first.
func TestStreamReasoningMembers(t *testing.T) {
	sink := &reasonSink{}
	_, err := runReasoning(t, sink,
		vllmChunk(`{"reasoning":"One"}`, ""),
		vllmChunk(`{"reasoning_content":" two","reasoning":" two"}`, ""),
		vllmChunk(`{"reasoning_content":" three","reasoning":" four"}`, ""),
		vllmChunk(`{"reasoning_content":null,"reasoning":null,"content":"A"}`, ""),
		// Another vendor's shape under the name is no reasoning text.
		vllmChunk(`{"reasoning":{"summary":"x"},"content":"B"}`, "stop"),
		vllmDone)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	want := []string{"r:One", "r: two", "r: three", "r: four", "d:A", "d:B"}
	if got := sink.got(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// llama-server with --reasoning-format deepseek, byte for byte (its chunk
// has choices first and no logprobs).
func TestStreamLlamaCppReasoning(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `data: {"choices":[{"finish_reason":` + finish + `,"index":0,"delta":` + delta + `}],"created":1752000000,"id":"chatcmpl-Qd8YJ3n0pV5lK2mZ","model":"qwen3-8b","system_fingerprint":"b5870-3120413c","object":"chat.completion.chunk"}` + "\n\n"
	}
	sink := &reasonSink{}
	_, err := runReasoning(t, sink,
		chunk(`{"role":"assistant","content":null}`, "null"),
		chunk(`{"reasoning_content":"Think"}`, "null"),
		chunk(`{"content":"Answer"}`, "null"),
		chunk(`{}`, `"stop"`),
		vllmDone)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if got, want := sink.got(), []string{"r:Think", "d:Answer"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// A sink with no use for reasoning gets the answer alone.
func TestStreamReasoningNeverInDeltas(t *testing.T) {
	sink := &fakeRunSink{}
	if _, err := runReasoning(t, sink,
		vllmChunk(`{"reasoning_content":"hidden"}`, ""),
		vllmChunk(`{"reasoning":"hidden too","content":"shown"}`, "stop"),
		vllmDone); err != nil {
		t.Fatalf("run: %v", err)
	}
	if sink.text() != "shown" {
		t.Fatalf("deltas %q", sink.deltas)
	}
}

// A server that ignores "stream" answers one document: its message's
// reasoning goes before its content.
func TestWholeAnswerReasoning(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-8f1c2b7e","object":"chat.completion","created":1735689600,"model":"deepseek-reasoner",`+
			`"choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"Two and two.","content":"4","tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],`+
			`"usage":{"prompt_tokens":10,"total_tokens":30,"completion_tokens":20}}`)
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	sink := &reasonSink{}
	res, err := in.Run(context.Background(), &iop.RunRequest{Target: "deepseek-reasoner", Operation: adapter.OpChat,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"2+2?"}]}`)}, sink)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if got, want := sink.got(), []string{"r:Two and two.", "d:4"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if res.FinishReason != "stop" || res.Usage.GetCompletionTokens() != 20 {
		t.Fatalf("result %+v", res)
	}
}

// Reasoning counts against the whole-answer bound as the answer's text
// does: a whole document past it is refused, whatever member fills it.
func TestWholeAnswerReasoningOverBoundRefused(t *testing.T) {
	bound := smallWholeResponse(t)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"`)
		row := strings.Repeat("x", 96<<10)
		for n := 0; n < bound+len(row); n += len(row) {
			if _, err := io.WriteString(w, row); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `","content":"4"},"finish_reason":"stop"}]}`)
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	sink := &reasonSink{}
	_, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"hi"}]}`)}, sink)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || !errors.Is(err, adapter.ErrAnswerTooLarge) {
		t.Fatalf("err = %v, want AnswerTooLarge", err)
	}
	if got := sink.got(); len(got) != 0 {
		t.Fatalf("events %q from a refused answer", got)
	}
}

// A backend that streams reasoning without end is cut as one that streams
// text without end: when the run's stream goes away (the edge cancels an
// answer past its bound), the adapter stops and drops the upstream
// connection instead of reading on.
func TestEndlessReasoningStreamCut(t *testing.T) {
	// The upstream gives up after most bytes: far more than the sink takes
	// (64 KiB of reasoning is some 1.5 MiB of events) plus what loopback
	// socket buffers can hold, so only a dropped connection stops it early.
	const most = 64 << 20
	cut := make(chan bool, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		batch := strings.Repeat(vllmChunk(`{"reasoning_content":"and then, "}`, ""), 64)
		for n := 0; n < most; n += len(batch) {
			if _, err := io.WriteString(w, batch); err != nil {
				cut <- true
				return
			}
			w.(http.Flusher).Flush()
		}
		_, _ = io.WriteString(w, vllmChunk(`{"content":"done"}`, "stop")+vllmDone)
		cut <- false
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	gone := errors.New("run stream gone")
	sink := &reasonSink{failAfter: 64 << 10, reasonErr: gone}
	_, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Stream: true,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"hi"}]}`)}, sink)
	if !errors.Is(err, gone) {
		t.Fatalf("err = %v, want the sink's", err)
	}
	select {
	case c := <-cut:
		if !c {
			t.Fatal("the upstream wrote everything: the connection was not dropped")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream kept writing after the run ended")
	}
}
