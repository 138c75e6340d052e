package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// completionTexts decodes a completion stream's data events: the text of
// each chunk with choices, in order ("[DONE]" and error events as they
// are).
func completionTexts(t *testing.T, raw string) []string {
	t.Helper()
	var out []string
	for _, d := range sseData(t, raw) {
		if d == "[DONE]" || strings.HasPrefix(d, `{"error":`) {
			out = append(out, d)
			continue
		}
		var c textCompletion
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %s: %v", d, err)
		}
		if len(c.Choices) == 1 {
			out = append(out, c.Choices[0].Text)
		}
	}
	return out
}

// A legacy completion shows no reasoning, but a model that thinks before
// it answers must not leave the stream silent: the stream starts (the
// 200, its headers and an empty-text chunk) at the first reasoning, and
// one more empty-text chunk follows each HiddenReasoningKeepAliveBytes
// of reasoning dropped since the stream last wrote.
func TestCompletionStreamKeepAliveWhileThinking(t *testing.T) {
	var buf bytes.Buffer
	commits, writes := 0, 0
	w := NewCompletionStreamWriter(&buf, func() { writes++ }, RenderOptions{Model: "m",
		OnFirstWrite: func() { commits++ }})
	add := func(ev *iop.RunEvent) {
		t.Helper()
		if err := w.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	add(evStart(nil))
	if commits != 0 || buf.Len() != 0 {
		t.Fatalf("START wrote %q", buf.String())
	}
	add(evReasoning("Let me think"))
	if commits != 1 || writes != 1 || !w.Started() {
		t.Fatalf("first reasoning: %d commits, %d writes, started %v", commits, writes, w.Started())
	}
	piece := strings.Repeat("r", 512)
	for range 4 * HiddenReasoningKeepAliveBytes / 512 { // 8 KiB
		add(evReasoning(piece))
	}
	if writes != 1+4 {
		t.Errorf("%d writes after 8 KiB of reasoning, want 5 (the first and one per %d bytes)", writes, HiddenReasoningKeepAliveBytes)
	}
	add(evReasoning(piece))
	add(evDelta("Hello")) // text resets the count: the stream just wrote
	for range HiddenReasoningKeepAliveBytes/512 - 1 {
		add(evReasoning(piece))
	}
	// Reasoning and text in one event: the text is written, no keep-alive.
	add(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Reasoning: strings.Repeat("r", 4096), Delta: " world"})
	add(evComplete("stop", &iop.Usage{PromptTokens: 1, CompletionTokens: 2}, nil))
	got := completionTexts(t, buf.String())
	want := []string{"", "", "", "", "", "Hello", " world", "", "[DONE]"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("chunk texts %q, want %q", got, want)
	}
	if strings.Contains(buf.String(), "rrr") || strings.Contains(buf.String(), "think") {
		t.Errorf("reasoning reached the stream: %s", buf.String())
	}
	if u, ok := w.Usage(); !ok || u.CompletionTokens != 2 {
		t.Errorf("usage %+v %v", u, ok)
	}
}

// Once the stream started for the model's reasoning, a run that fails
// before any text ends it as every started stream ends: an error event
// and no [DONE]. That covers a run with only reasoning and nothing else
// to show (the empty-run rule: a completion shows no reasoning).
func TestCompletionStreamThinkingThenFailure(t *testing.T) {
	for name, last := range map[string]*iop.RunEvent{
		"error":     evError("upstream", "boom", 500),
		"empty run": evComplete("stop", nil, nil),
		"cancelled": evCancelled(),
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewCompletionStreamWriter(&buf, nil, RenderOptions{Model: "m"})
			if err := w.Add(evReasoning("hmm")); err != nil {
				t.Fatal(err)
			}
			if err := w.Add(last); err != nil {
				t.Fatalf("a failure after the start returned %v, want it written", err)
			}
			got := completionTexts(t, buf.String())
			if len(got) != 2 || got[0] != "" || !strings.HasPrefix(got[1], `{"error":`) {
				t.Fatalf("stream %q", buf.String())
			}
			if f := w.Failure(); f == nil || !errors.Is(f, ErrUpstream) || !w.Done() {
				t.Errorf("failure %v, done %v", f, w.Done())
			}
		})
	}
	// Abort (a timeout, the node lost) after the start: the error event.
	var buf bytes.Buffer
	w := NewCompletionStreamWriter(&buf, nil, RenderOptions{Model: "m"})
	_ = w.Add(evReasoning("hmm"))
	if err := w.Abort(UpstreamError("The provider did not answer in time.")); err != nil {
		t.Fatal(err)
	}
	if got := completionTexts(t, buf.String()); len(got) != 2 || !strings.Contains(got[1], "did not answer in time") {
		t.Fatalf("aborted stream %q", buf.String())
	}
}

// A run that fails before it thought or answered still writes nothing:
// the caller answers with an HTTP error (and may try another provider).
func TestCompletionStreamFailureBeforeThinking(t *testing.T) {
	var buf bytes.Buffer
	w := NewCompletionStreamWriter(&buf, nil, RenderOptions{Model: "m"})
	_ = w.Add(evStart(nil))
	var e *Error
	if err := w.Add(evError("upstream", "boom", 503)); !errors.As(err, &e) || buf.Len() != 0 || w.Started() {
		t.Fatalf("err %v, wrote %q", err, buf.String())
	}
}

// BenchmarkCompletionStreamDelta is a streamed completion's per-delta
// cost: one text chunk written.
func BenchmarkCompletionStreamDelta(b *testing.B) {
	w := NewCompletionStreamWriter(io.Discard, nil, RenderOptions{Model: "qwen-7b", IncludeUsage: true})
	benchAdd(b, w, evDelta(" gateway"))
}
