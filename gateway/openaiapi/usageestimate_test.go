package openaiapi

import (
	"bytes"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TestEstimatedUsageCountsToolCalls: a run that reports no usage is billed
// by estimate, and a tool call is generated output like text: its name and
// arguments count, whole or streamed, and both renderings agree.
func TestEstimatedUsageCountsToolCalls(t *testing.T) {
	calls := `[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":\"celsius\",\"days\":3}"}}]`
	// "ok" + "get_weather" + the 41 bytes of arguments.
	want := int64(EstimateTokens(2+len("get_weather")+len(`{"city":"Paris","unit":"celsius","days":3}`), 0))
	events := []*iop.RunEvent{evStart(nil), evDelta("ok"), evComplete("tool_calls", nil, map[string]string{MetaToolCalls: calls})}

	a := NewChatAggregator(RenderOptions{Model: "m", PromptTokens: 7, ToolNames: offered})
	for _, ev := range events {
		a.Add(ev)
	}
	if _, e := a.Result(); e != nil {
		t.Fatal(e)
	}
	if u, reported := a.Usage(); reported || u.CompletionTokens != want || u.TotalTokens != 7+want {
		t.Errorf("whole answer: usage %+v (reported %v), want %d completion tokens", u, reported, want)
	}

	_, w, err := runStream(t, RenderOptions{Model: "m", PromptTokens: 7, ToolNames: offered}, events...)
	if err != nil {
		t.Fatal(err)
	}
	if u, reported := w.Usage(); reported || u.CompletionTokens != want || u.TotalTokens != 7+want {
		t.Errorf("stream: usage %+v (reported %v), want %d completion tokens", u, reported, want)
	}
}

// TestFailedRunUsageIsEstimated: a run that fails after generating text
// still used the upstream, so the usage the renderers give for it (the
// caller's metrics and accounting) is the estimate of what was generated,
// not zero — for chat and legacy completions, whole and streamed, failed
// by the node or aborted by the edge.
func TestFailedRunUsageIsEstimated(t *testing.T) {
	gen := "abcdefghijkl" // 3 tokens by estimate
	const prompt = 5
	check := func(what string, u Usage, reported bool) {
		t.Helper()
		if reported || u.PromptTokens != prompt || u.CompletionTokens != 3 || u.TotalTokens != prompt+3 {
			t.Errorf("%s: usage %+v (reported %v), want %d+3 estimated", what, u, reported, prompt)
		}
	}
	opts := RenderOptions{Model: "m", PromptTokens: prompt}
	failed := []*iop.RunEvent{evStart(nil), evDelta(gen), evError("upstream_error", "boom", 0)}

	ca := NewChatAggregator(opts)
	for _, ev := range failed {
		ca.Add(ev)
	}
	if _, e := ca.Result(); e == nil {
		t.Fatal("chat aggregator: failed run rendered")
	}
	u, rep := ca.Usage()
	check("chat aggregator", u, rep)

	pa := NewCompletionAggregator(opts)
	for _, ev := range failed {
		pa.Add(ev)
	}
	if _, e := pa.Result(); e == nil {
		t.Fatal("completion aggregator: failed run rendered")
	}
	u, rep = pa.Usage()
	check("completion aggregator", u, rep)

	_, cw, _ := runStream(t, opts, failed...)
	u, rep = cw.Usage()
	check("chat stream", u, rep)

	var buf bytes.Buffer
	pw := NewCompletionStreamWriter(&buf, nil, opts)
	_ = pw.Add(evStart(nil))
	_ = pw.Add(evDelta(gen))
	_ = pw.Abort(UpstreamError("lost"))
	u, rep = pw.Usage()
	check("completion stream abort", u, rep)

	buf.Reset()
	cw = NewChatStreamWriter(&buf, nil, opts)
	_ = cw.Add(evStart(nil))
	_ = cw.Add(evDelta(gen))
	_ = cw.Abort(UpstreamError("lost"))
	u, rep = cw.Usage()
	check("chat stream abort", u, rep)
}
