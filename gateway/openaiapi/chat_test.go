package openaiapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestChatAggregatorContent(t *testing.T) {
	opts := RenderOptions{Model: "qwen-7b", ID: "chatcmpl-x", Created: 1700000000}
	resp, body, e := aggregate(t, opts,
		evStart(nil), evDelta("Hello"), evDelta(", world"),
		evComplete("length", &iop.Usage{PromptTokens: 7, CompletionTokens: 3}, nil))
	if e != nil {
		t.Fatal(e)
	}
	want := `{"id":"chatcmpl-x","object":"chat.completion","created":1700000000,"model":"qwen-7b","choices":[{"index":0,"message":{"role":"assistant","content":"Hello, world","refusal":null},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`
	if string(body) != want {
		t.Fatalf("body\n got %s\nwant %s", body, want)
	}
	if resp.Choices[0].Message.Content != "Hello, world" || resp.Usage.TotalTokens != 10 || resp.Choices[0].FinishReason != openai.FinishReasonLength {
		t.Fatalf("sdk view %+v", resp)
	}
	// Through the SDK's own HTTP client, too.
	got, err := sdkClient(t, 200, string(body)).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "qwen-7b"})
	if err != nil || got.Choices[0].Message.Content != "Hello, world" || got.Model != "qwen-7b" {
		t.Fatalf("sdk client: %+v %v", got, err)
	}
}

func TestChatAggregatorDefaults(t *testing.T) {
	a := NewChatAggregator(RenderOptions{Model: "m", PromptTokens: 5})
	a.Add(evDelta("abcdefgh"))
	if !a.Add(evComplete("", nil, nil)) || !a.Done() {
		t.Fatal("complete must be terminal")
	}
	a.Add(evDelta("ignored after terminal"))
	body, e := a.Result()
	if e != nil {
		t.Fatal(e)
	}
	var resp openai.ChatCompletionResponse
	_ = json.Unmarshal(body, &resp)
	if !strings.HasPrefix(resp.ID, "chatcmpl-") || len(resp.ID) != len("chatcmpl-")+29 || resp.Created == 0 {
		t.Fatalf("id/created %q %d", resp.ID, resp.Created)
	}
	if resp.Choices[0].FinishReason != "stop" || resp.Choices[0].Message.Content != "abcdefgh" {
		t.Fatalf("%+v", resp.Choices[0])
	}
	u, reported := a.Usage()
	if reported || u.PromptTokens != 5 || u.CompletionTokens != 2 || u.TotalTokens != 7 {
		t.Fatalf("estimated usage %+v %v", u, reported)
	}
	if b2, _ := a.Result(); !bytes.Equal(body, b2) {
		t.Fatal("Result is not stable")
	}
	if a.FinishReason() != "stop" {
		t.Fatal(a.FinishReason())
	}
}

func TestChatAggregatorErrors(t *testing.T) {
	cases := []struct {
		name   string
		events []*iop.RunEvent
		status int
		code   string
	}{
		{"upstream", []*iop.RunEvent{evStart(nil), evError("upstream_error", "boom", 500)}, 502, CodeUpstreamError},
		{"invalid", []*iop.RunEvent{evStart(nil), evError("invalid_request", "too long", 400)}, 400, CodeInvalidRequest},
		{"capacity", []*iop.RunEvent{evError("capacity_exceeded", "", 0)}, 503, CodeNoProviderAvailable},
		{"after deltas", []*iop.RunEvent{evDelta("partial"), evError("timeout", "slow", 0)}, 502, CodeUpstreamError},
		{"cancelled", []*iop.RunEvent{evDelta("x"), evCancelled()}, 502, CodeUpstreamError},
		{"no terminal", []*iop.RunEvent{evStart(nil), evDelta("x")}, 502, CodeUpstreamError},
		{"bad native calls", []*iop.RunEvent{evComplete("tool_calls", nil, map[string]string{MetaToolCalls: "{"})}, 502, CodeUpstreamError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, body, e := aggregate(t, RenderOptions{Model: "m"}, c.events...)
			if e == nil || body != nil || e.Status != c.status || e.Code != c.code {
				t.Fatalf("got %v %s", e, body)
			}
		})
	}
}

func TestChatAggregatorNativeToolCalls(t *testing.T) {
	native := `[{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]`
	// The content mentions a text block: native mode must never parse it.
	resp, body, e := aggregate(t, RenderOptions{Model: "m", ToolNames: offered},
		evDelta(`<tool_call>{"name":"lookup"}</tool_call>`),
		evComplete("tool_calls", nil, map[string]string{MetaToolCalls: native, MetaTextToolFallback: "true"}))
	if e != nil {
		t.Fatal(e)
	}
	m := resp.Choices[0].Message
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_abc" || m.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("tool calls %+v", m.ToolCalls)
	}
	if m.Content != `<tool_call>{"name":"lookup"}</tool_call>` || resp.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("%s", body)
	}
	// Only tool calls: content is null.
	_, body, _ = aggregate(t, RenderOptions{Model: "m"},
		evDelta("\n"), evComplete("stop", nil, map[string]string{MetaToolCalls: native}))
	if !bytes.Contains(body, []byte(`"content":null`)) || !bytes.Contains(body, []byte(`"finish_reason":"tool_calls"`)) {
		t.Fatalf("%s", body)
	}
}

func TestChatAggregatorTextToolCalls(t *testing.T) {
	content := "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>\n"
	// Marked (on any event): restored, content null.
	resp, body, e := aggregate(t, RenderOptions{Model: "m", ToolNames: offered},
		evStart(nil), evDelta(content), evComplete("stop", nil, fallbackMeta))
	if e != nil {
		t.Fatal(e)
	}
	m := resp.Choices[0].Message
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` ||
		m.ToolCalls[0].Type != openai.ToolTypeFunction || !strings.HasPrefix(m.ToolCalls[0].ID, "call_") {
		t.Fatalf("%+v", m.ToolCalls)
	}
	if !bytes.Contains(body, []byte(`"content":null`)) || resp.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("%s", body)
	}
	// Unmarked: content untouched.
	resp, _, _ = aggregate(t, RenderOptions{Model: "m", ToolNames: offered}, evDelta(content), evComplete("", nil, nil))
	if resp.Choices[0].Message.Content != content || len(resp.Choices[0].Message.ToolCalls) != 0 {
		t.Fatalf("%+v", resp.Choices[0])
	}
	// finish_reason tool_calls without any call becomes stop.
	if resp.Choices[0].FinishReason != "stop" {
		t.Fatal(resp.Choices[0].FinishReason)
	}
}

func TestChatStreamBasic(t *testing.T) {
	first := 0
	opts := RenderOptions{Model: "qwen-7b", ID: "chatcmpl-s", Created: 42, OnFirstWrite: func() { first++ }}
	var buf bytes.Buffer
	flushes := 0
	w := NewChatStreamWriter(&buf, func() { flushes++ }, opts)
	if err := w.Add(evStart(nil)); err != nil || buf.Len() != 0 || first != 0 || w.Started() {
		t.Fatal("START must not write")
	}
	if err := w.Add(evDelta("Hel")); err != nil {
		t.Fatal(err)
	}
	if first != 1 || flushes != 1 || !w.Started() {
		t.Fatalf("first=%d flushes=%d", first, flushes)
	}
	wantSoFar := `data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":42,"model":"qwen-7b","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":42,"model":"qwen-7b","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	if buf.String() != wantSoFar {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), wantSoFar)
	}
	_ = w.Add(evDelta("lo"))
	if flushes != 2 {
		t.Fatal("each delta must be flushed at once")
	}
	_ = w.Add(evComplete("stop", &iop.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}, nil))
	if !w.Done() || w.FinishReason() != "stop" || first != 1 {
		t.Fatal("not done")
	}
	tail := `data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":42,"model":"qwen-7b","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n" + "data: [DONE]\n\n"
	if !strings.HasSuffix(buf.String(), tail) || strings.Contains(buf.String(), "usage") {
		t.Fatalf("tail:\n%s", buf.String())
	}
	r := decodeChatStream(t, buf.String())
	if r.content != "Hello" || r.finish != "stop" || !r.done || r.usage != nil {
		t.Fatalf("%+v", r)
	}
	if u, ok := w.Usage(); !ok || u.TotalTokens != 3 {
		t.Fatalf("usage %+v", u)
	}
	chunks, err := sdkStreamAll(t, buf.String())
	if err != nil || len(chunks) != 4 || chunks[0].Choices[0].Delta.Role != "assistant" || chunks[3].Choices[0].FinishReason != "stop" {
		t.Fatalf("sdk: %d chunks, %v", len(chunks), err)
	}
}

func TestChatStreamIncludeUsage(t *testing.T) {
	raw, _, err := runStream(t, RenderOptions{Model: "m", IncludeUsage: true},
		evDelta("a"), evComplete("stop", &iop.Usage{PromptTokens: 4, CompletionTokens: 1}, nil))
	if err != nil {
		t.Fatal(err)
	}
	data := sseData(t, raw)
	if len(data) != 5 || data[4] != "[DONE]" {
		t.Fatalf("%q", data)
	}
	for _, d := range data[:3] {
		if !strings.HasSuffix(d, `,"usage":null}`) {
			t.Fatalf("chunk without usage:null: %s", d)
		}
	}
	if !strings.Contains(data[3], `"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}`) {
		t.Fatalf("usage chunk %s", data[3])
	}
	chunks, err := sdkStreamAll(t, raw)
	if err != nil || len(chunks) != 4 || chunks[3].Usage == nil || chunks[3].Usage.TotalTokens != 5 || len(chunks[3].Choices) != 0 || chunks[0].Usage != nil {
		t.Fatalf("sdk %v %+v", err, chunks)
	}
}

func TestChatStreamErrorAfterFirstByte(t *testing.T) {
	raw, w, err := runStream(t, RenderOptions{Model: "m"},
		evStart(nil), evDelta("partial"), evError("upstream_error", "backend died", 502))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(raw, "[DONE]") {
		t.Fatal("[DONE] after an error")
	}
	want := `data: {"error":{"message":"backend died","type":"server_error","param":null,"code":"upstream_error"}}` + "\n\n"
	if !strings.HasSuffix(raw, want) {
		t.Fatalf("got %s", raw)
	}
	if w.Failure() == nil || w.Failure().Code != CodeUpstreamError {
		t.Fatal("failure not recorded")
	}
	chunks, err := sdkStreamAll(t, raw)
	if err == nil || !strings.Contains(err.Error(), "backend died") || len(chunks) != 2 {
		t.Fatalf("sdk must surface the error: %v (%d chunks)", err, len(chunks))
	}
	// Cancelled after the first byte: same shape.
	raw, _, _ = runStream(t, RenderOptions{Model: "m"}, evDelta("x"), evCancelled())
	if strings.Contains(raw, "[DONE]") || !strings.Contains(raw, `data: {"error":`) {
		t.Fatal(raw)
	}
}

func TestChatStreamErrorBeforeFirstByte(t *testing.T) {
	for _, tools := range [][]string{nil, offered} {
		called := false
		// With tools offered, held text (a partial tag) is not a first byte.
		raw, w, err := runStream(t, RenderOptions{Model: "m", ToolNames: tools, OnFirstWrite: func() { called = true }},
			evStart(fallbackMeta), evDelta("  <tool_"), evError("invalid_request", "bad schema", 400))
		var e *Error
		if tools == nil {
			if raw == "" {
				t.Fatal("without tools the text is written at once")
			}
			continue
		}
		if !errors.As(err, &e) || e.Status != 400 || raw != "" || w.Started() || called {
			t.Fatalf("err=%v raw=%q", err, raw)
		}
	}
	raw, _, err := runStream(t, RenderOptions{Model: "m"}, evStart(nil), evCancelled())
	var e *Error
	if !errors.As(err, &e) || e.Status != 502 || raw != "" {
		t.Fatalf("%v %q", err, raw)
	}
}

func TestChatStreamAbort(t *testing.T) {
	var buf bytes.Buffer
	w := NewChatStreamWriter(&buf, nil, RenderOptions{Model: "m"})
	if err := w.Abort(UpstreamError("lost")); err == nil || buf.Len() != 0 {
		t.Fatal("abort before first byte must return the error and write nothing")
	}
	w = NewChatStreamWriter(&buf, nil, RenderOptions{Model: "m"})
	_ = w.Add(evDelta("x"))
	if err := w.Abort(UpstreamError("lost")); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(buf.String(), `"code":"upstream_error"}}`+"\n\n") || !w.Done() {
		t.Fatal(buf.String())
	}
	if w.Abort(UpstreamError("again")) != nil || w.Add(evDelta("y")) != nil {
		t.Fatal("writer must be inert after the end")
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("broken pipe")
}

func TestChatStreamWriteError(t *testing.T) {
	fw := &failWriter{}
	w := NewChatStreamWriter(fw, nil, RenderOptions{Model: "m"})
	err := w.Add(evDelta("x"))
	var e *Error
	if err == nil || errors.As(err, &e) {
		t.Fatalf("want a plain write error, got %v", err)
	}
	if err2 := w.Add(evDelta("y")); err2 == nil || fw.n != 1 {
		t.Fatal("writes must stop after the first failure")
	}
}

func TestChatStreamNativeToolCalls(t *testing.T) {
	native := `[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"lookup","arguments":"{}"}}]`
	raw, _, err := runStream(t, RenderOptions{Model: "m", ToolNames: offered},
		evStart(nil), evComplete("tool_calls", nil, map[string]string{MetaToolCalls: native}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(raw, `"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`) {
		t.Fatal(raw)
	}
	r := decodeChatStream(t, raw)
	if len(r.calls) != 2 || r.calls[1].ID != "call_2" || r.finish != "tool_calls" || r.content != "" || !r.done {
		t.Fatalf("%+v", r)
	}
	chunks, err := sdkStreamAll(t, raw)
	if err != nil || len(chunks) != 4 || *chunks[2].Choices[0].Delta.ToolCalls[0].Index != 1 {
		t.Fatalf("sdk %v", err)
	}
	// Malformed native calls after the first byte: error event.
	raw, _, _ = runStream(t, RenderOptions{Model: "m"}, evDelta("x"), evComplete("", nil, map[string]string{MetaToolCalls: "[{"}))
	if !strings.Contains(raw, `data: {"error":`) || strings.Contains(raw, "[DONE]") {
		t.Fatal(raw)
	}
}

func TestChatStreamNoToolsNoHold(t *testing.T) {
	// Without offered tools nothing is held or parsed, even when marked.
	block := `<tool_call>{"name":"lookup"}</tool_call>`
	var buf bytes.Buffer
	w := NewChatStreamWriter(&buf, nil, RenderOptions{Model: "m"})
	_ = w.Add(evStart(fallbackMeta))
	_ = w.Add(evDelta(block[:5]))
	if r := decodeChatStream(t, buf.String()); r.content != block[:5] {
		t.Fatalf("held without tools: %q", r.content)
	}
	_ = w.Add(evDelta(block[5:]))
	_ = w.Add(evComplete("stop", nil, nil))
	if r := decodeChatStream(t, buf.String()); r.content != block || len(r.calls) != 0 || r.finish != "stop" {
		t.Fatalf("%+v", r)
	}
}

// TestChatStreamHoldRelease checks what is released after each delta.
func TestChatStreamHoldRelease(t *testing.T) {
	var buf bytes.Buffer
	w := NewChatStreamWriter(&buf, nil, RenderOptions{Model: "m", ToolNames: offered})
	step := func(ev *iop.RunEvent, wantContent string, wantCalls int) {
		t.Helper()
		if err := w.Add(ev); err != nil {
			t.Fatal(err)
		}
		r := decodeChatStream(t, buf.String())
		if r.content != wantContent || len(r.calls) != wantCalls {
			t.Fatalf("after %q: content %q calls %d, want %q %d", ev.GetDelta(), r.content, len(r.calls), wantContent, wantCalls)
		}
	}
	step(evStart(nil), "", 0)
	step(evDelta("\n "), "", 0)                         // leading whitespace held
	step(evDelta("Hi <"), "\n Hi ", 0)                  // text released, '<' held
	step(evDelta("b> and <tool_"), "\n Hi <b> and ", 0) // not a tag: released; partial held
	step(evDelta(`call>{"name":"lookup",`), "\n Hi <b> and ", 0)
	step(evDelta(`"arguments":{"q":1}}</tool_`), "\n Hi <b> and ", 0)
	step(evDelta("call>"), "\n Hi <b> and ", 0) // valid call, run not marked yet: held
	step(evDelta(" more"), "\n Hi <b> and ", 0) // held behind the unconfirmed call
	step(evComplete("stop", nil, fallbackMeta), "\n Hi <b> and  more", 1)
	r := decodeChatStream(t, buf.String())
	if r.finish != "tool_calls" || r.calls[0].Function.Arguments != `{"q":1}` || !r.done {
		t.Fatalf("%+v", r)
	}
}

func TestChatStreamMarkedEarlyEmitsCallsAtOnce(t *testing.T) {
	var buf bytes.Buffer
	w := NewChatStreamWriter(&buf, nil, RenderOptions{Model: "m", ToolNames: offered})
	_ = w.Add(evStart(fallbackMeta))
	_ = w.Add(evDelta(`<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>`))
	r := decodeChatStream(t, buf.String())
	if len(r.calls) != 1 || r.content != "" {
		t.Fatalf("call not emitted at once: %+v", r)
	}
	_ = w.Add(evDelta("\n"))
	_ = w.Add(evComplete("stop", nil, nil))
	r = decodeChatStream(t, buf.String())
	if r.content != "" || r.finish != "tool_calls" || !r.done {
		t.Fatalf("%+v", r)
	}
}

// streamSamples are contents whose streamed rendering, split anywhere, must
// equal the non-stream rendering.
var streamSamples = []string{
	"Let me check.\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>\n",
	"<tool_call>{\"name\":\"get_weather\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"lookup\",\"arguments\":\"{\\\"q\\\":1}\"}</tool_call>",
	"a <tool_call>{\"name\":\"nope\"}</tool_call> b <tool_call>{\"name\":\"lookup\"}</tool_call> c",
	"x < y <tool_ z <tool_call>not json</tool_call> w </tool_call>",
	"  \n <tool_call>{\"name\":\"lookup\"} unclosed",
	"<tool_call>a<tool_call>{\"name\":\"lookup\"}</tool_call>tail<<tool_call>{\"name\":\"lookup\"}</tool_call>>",
	" \n\t ",
	"plain answer with no tools at all é🙂",
	"<tool_call><tool_call></tool_call></tool_call>",
}

type rendered struct {
	content string
	calls   []string // name + " " + arguments
	finish  string
}

func renderNonStream(t testing.TB, opts RenderOptions, events []*iop.RunEvent) rendered {
	resp, _, e := aggregate(t, opts, events...)
	if e != nil {
		t.Fatal(e)
	}
	out := rendered{content: resp.Choices[0].Message.Content, finish: string(resp.Choices[0].FinishReason)}
	for _, c := range resp.Choices[0].Message.ToolCalls {
		out.calls = append(out.calls, c.Function.Name+" "+c.Function.Arguments)
	}
	return out
}

func renderStream(t testing.TB, opts RenderOptions, events []*iop.RunEvent) rendered {
	raw, _, err := runStream(t, opts, events...)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeChatStream(t, raw)
	if !r.done {
		t.Fatal("no [DONE]")
	}
	out := rendered{content: r.content, finish: r.finish}
	for _, c := range r.calls {
		out.calls = append(out.calls, c.Function.Name+" "+c.Function.Arguments)
	}
	return out
}

// streamEvents builds a run from pieces, with the fallback mark on START,
// on COMPLETE or nowhere.
func streamEvents(pieces []string, markAt string) []*iop.RunEvent {
	var startMeta, endMeta map[string]string
	switch markAt {
	case "start":
		startMeta = fallbackMeta
	case "complete":
		endMeta = fallbackMeta
	}
	evs := []*iop.RunEvent{evStart(startMeta)}
	for _, p := range pieces {
		evs = append(evs, evDelta(p))
	}
	return append(evs, evComplete("stop", nil, endMeta))
}

func equalRendered(a, b rendered) bool {
	return a.content == b.content && a.finish == b.finish && strings.Join(a.calls, "\x00") == strings.Join(b.calls, "\x00")
}

func TestChatStreamEqualsNonStreamAtEverySplit(t *testing.T) {
	for _, opts := range []RenderOptions{
		{Model: "m", ToolNames: offered},
		{Model: "m", ToolNames: offered, SingleToolCall: true}, // parallel_tool_calls false
	} {
		chatStreamEqualsNonStreamAtEverySplit(t, opts)
	}
}

func chatStreamEqualsNonStreamAtEverySplit(t *testing.T, opts RenderOptions) {
	for _, content := range streamSamples {
		for _, markAt := range []string{"start", "complete", "none"} {
			want := renderNonStream(t, opts, streamEvents([]string{content}, markAt))
			// Deltas are proto3 strings, hence whole UTF-8 runes: split on
			// rune boundaries only.
			for i := 0; i <= len(content); i++ {
				if !utf8.RuneStart(content[min(i, len(content)-1)]) && i < len(content) {
					continue
				}
				got := renderStream(t, opts, streamEvents([]string{content[:i], content[i:]}, markAt))
				if !equalRendered(got, want) {
					t.Fatalf("mark %s, split %d of %q:\n got %+v\nwant %+v", markAt, i, content, got, want)
				}
			}
			// Rune-by-rune delivery.
			var bytesPieces []string
			for _, r := range content {
				bytesPieces = append(bytesPieces, string(r))
			}
			if got := renderStream(t, opts, streamEvents(bytesPieces, markAt)); !equalRendered(got, want) {
				t.Fatalf("mark %s, byte-wise %q:\n got %+v\nwant %+v", markAt, content, got, want)
			}
		}
	}
}

func TestChatStreamMarkOnDeltaEvent(t *testing.T) {
	content := streamSamples[0]
	opts := RenderOptions{Model: "m", ToolNames: offered}
	want := renderNonStream(t, opts, streamEvents([]string{content}, "complete"))
	for i := 0; i <= len(content); i++ {
		d := evDelta(content[i:])
		d.Metadata = fallbackMeta
		got := renderStream(t, opts, []*iop.RunEvent{evDelta(content[:i]), d, evComplete("stop", nil, nil)})
		if !equalRendered(got, want) {
			t.Fatalf("split %d: got %+v want %+v", i, got, want)
		}
	}
}
