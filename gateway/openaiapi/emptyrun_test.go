package openaiapi

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// emptyRuns are runs that completed with nothing to show.
var emptyRuns = map[string][]*iop.RunEvent{
	"complete only":         {evComplete("stop", nil, nil)},
	"start then complete":   {evStart(nil), evComplete("", nil, nil)},
	"empty deltas":          {evStart(nil), evDelta(""), evDelta(""), evComplete("stop", nil, nil)},
	"fallback mark only":    {evStart(fallbackMeta), evComplete("stop", nil, nil)},
	"empty tool-call value": {evStart(nil), evComplete("stop", nil, map[string]string{MetaToolCalls: ""})},
}

func wantEmptyRunError(t *testing.T, e *Error) {
	t.Helper()
	if e == nil || e.Status != http.StatusBadGateway || e.Code != CodeUpstreamError || !errors.Is(e, ErrUpstream) ||
		e.Message != "The provider returned an empty response." {
		t.Fatalf("error %v, want 502 upstream_error for an empty run", e)
	}
}

func TestEmptyRunIsUpstreamError(t *testing.T) {
	for name, events := range emptyRuns {
		t.Run(name, func(t *testing.T) {
			// Non-stream chat and completion.
			_, _, e := aggregate(t, RenderOptions{Model: "m"}, events...)
			wantEmptyRunError(t, e)
			ca := NewCompletionAggregator(RenderOptions{Model: "m"})
			for _, ev := range events {
				ca.Add(ev)
			}
			_, e = ca.Result()
			wantEmptyRunError(t, e)

			// Streams: reported before the first byte, nothing written.
			first := false
			raw, w, err := runStream(t, RenderOptions{Model: "m", ToolNames: offered, OnFirstWrite: func() { first = true }}, events...)
			var fe *Error
			if !errors.As(err, &fe) || raw != "" || first || w.Started() {
				t.Fatalf("chat stream: err %v, wrote %q", err, raw)
			}
			wantEmptyRunError(t, fe)
			wantEmptyRunError(t, w.Failure())

			var buf bytes.Buffer
			cw := NewCompletionStreamWriter(&buf, nil, RenderOptions{Model: "m"})
			err = nil
			for _, ev := range events {
				if aerr := cw.Add(ev); aerr != nil {
					err = aerr
				}
			}
			if !errors.As(err, &fe) || buf.Len() != 0 {
				t.Fatalf("completion stream: err %v, wrote %q", err, buf.String())
			}
			wantEmptyRunError(t, fe)
		})
	}
}

func TestEmptyEmbeddingRunIsUpstreamError(t *testing.T) {
	a := NewEmbeddingAggregator(EmbeddingOptions{Model: "e", InputCount: 1})
	a.Add(evStart(nil))
	a.Add(evComplete("stop", nil, nil))
	_, e := a.Result()
	wantEmptyRunError(t, e)
}

// TestRunsWithEvidenceAreNotEmpty: text, tool calls, output or usage each
// make a completed run a real answer, even with nothing else.
func TestRunsWithEvidenceAreNotEmpty(t *testing.T) {
	usage := &iop.Usage{PromptTokens: 5, CompletionTokens: 0, TotalTokens: 5}
	calls := `[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]`
	cases := map[string][]*iop.RunEvent{
		"text":       {evDelta("hi"), evComplete("stop", nil, nil)},
		"usage only": {evStart(nil), evComplete("stop", usage, nil)},
		"usage on a delta event": {evStart(nil), {Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Usage: usage},
			evComplete("stop", nil, nil)},
		"native tool calls": {evStart(nil), evComplete("tool_calls", nil, map[string]string{MetaToolCalls: calls})},
	}
	for name, events := range cases {
		t.Run(name, func(t *testing.T) {
			if _, body, e := aggregate(t, RenderOptions{Model: "m"}, events...); e != nil || len(body) == 0 {
				t.Fatalf("aggregate: %v", e)
			}
			raw, w, err := runStream(t, RenderOptions{Model: "m"}, events...)
			if err != nil || w.Failure() != nil || !bytes.HasSuffix([]byte(raw), doneEvent) {
				t.Fatalf("stream: %v %v %q", err, w.Failure(), raw)
			}
		})
	}
	a := NewEmbeddingAggregator(EmbeddingOptions{Model: "e", InputCount: 1})
	a.Add(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, Output: []byte(`[[0.5,1]]`)})
	if _, e := a.Result(); e != nil {
		t.Fatalf("embedding with output: %v", e)
	}
}
