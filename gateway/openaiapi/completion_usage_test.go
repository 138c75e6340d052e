package openaiapi

import (
	"io"
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TestCompletionEstimateCountsReasoning: a thinking model generated its
// reasoning as much as its text, and OpenAI counts reasoning tokens in
// completion_tokens. A legacy completion does not show the reasoning, but
// the usage estimated for a run that reports none counts it, as chat's
// does: the same run is the same work whichever route asked for it.
func TestCompletionEstimateCountsReasoning(t *testing.T) {
	thought := strings.Repeat("hmm ", 1000) // 4000 bytes
	events := []*iop.RunEvent{evStart(nil), evReasoning(thought), evDelta("ok"), evComplete("stop", nil, nil)}
	want := int64(EstimateTokens(len(thought)+len("ok"), 0))
	opts := RenderOptions{Model: "m", PromptTokens: 5}
	check := func(what string, u Usage, reported bool) {
		t.Helper()
		if reported || u.CompletionTokens != want || u.TotalTokens != 5+want {
			t.Errorf("%s: usage %+v (reported %v), want %d completion tokens", what, u, reported, want)
		}
	}

	ca := NewChatAggregator(opts)
	pa := NewCompletionAggregator(opts)
	for _, ev := range events {
		ca.Add(ev)
		pa.Add(ev)
	}
	// After the terminal event nothing counts (the wire sends nothing
	// there; a broken node's extra event is not the run's).
	pa.Add(evReasoning(thought))
	if _, e := ca.Result(); e != nil {
		t.Fatal(e)
	}
	u, rep := ca.Usage()
	check("chat aggregator", u, rep)
	if _, e := pa.Result(); e != nil {
		t.Fatal(e)
	}
	u, rep = pa.Usage()
	check("completion aggregator", u, rep)

	_, cw, err := runStream(t, opts, events...)
	if err != nil {
		t.Fatal(err)
	}
	u, rep = cw.Usage()
	check("chat stream", u, rep)

	pw := NewCompletionStreamWriter(io.Discard, nil, opts)
	for _, ev := range events {
		if err := pw.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	u, rep = pw.Usage()
	check("completion stream", u, rep)

	// Aborted while thinking: the reasoning generated so far counts.
	pw = NewCompletionStreamWriter(io.Discard, nil, opts)
	for _, ev := range events[:2] {
		if err := pw.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	_ = pw.Abort(errCancelled())
	if u, rep = pw.Usage(); rep || u.CompletionTokens != int64(EstimateTokens(len(thought), 0)) {
		t.Errorf("aborted completion stream: usage %+v (reported %v), want %d completion tokens", u, rep, EstimateTokens(len(thought), 0))
	}
}

// TestCompletionStreamEstimateCountsReasoningBesideText: a delta that
// carries reasoning and text together counts both in the stream's
// estimate, as the aggregator's does.
func TestCompletionStreamEstimateCountsReasoningBesideText(t *testing.T) {
	ev := evDelta("ok")
	ev.Reasoning = strings.Repeat("hmm ", 100)
	events := []*iop.RunEvent{evStart(nil), ev, evComplete("stop", nil, nil)}
	opts := RenderOptions{Model: "m", PromptTokens: 5}
	want := int64(EstimateTokens(len(ev.Reasoning)+len("ok"), 0))

	pa := NewCompletionAggregator(opts)
	pw := NewCompletionStreamWriter(io.Discard, nil, opts)
	for _, ev := range events {
		pa.Add(ev)
		if err := pw.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, e := pa.Result(); e != nil {
		t.Fatal(e)
	}
	if u, _ := pa.Usage(); u.CompletionTokens != want {
		t.Errorf("completion aggregator: %d completion tokens, want %d", u.CompletionTokens, want)
	}
	if u, _ := pw.Usage(); u.CompletionTokens != want {
		t.Errorf("completion stream: %d completion tokens, want %d", u.CompletionTokens, want)
	}
}
