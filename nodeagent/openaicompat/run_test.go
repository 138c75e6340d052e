package openaicompat

import (
	"context"
	"errors"
	"github.com/iop-gateway/iop/internal/testinput"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

const weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

func chatInput(system string, tools bool) *iop.RunInput {
	msgs := `[{"role":"user","content":"Weather in Paris?"}]`
	if system != "" {
		msgs = `[{"role":"system","content":` + system + `},{"role":"user","content":"Weather in Paris?"}]`
	}
	in := `{"messages":` + msgs + `,"temperature":0.2`
	if tools {
		in += `,"tools":` + weatherTools + `,"tool_choice":"auto"`
	}
	return testinput.Chat(in + "}")
}

func TestRunChatStreaming(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		rec.record(t, r)
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"role":"assistant","content":""}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":"Hello"}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":" world"}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":""}`, "stop"))
		sseWrite(t, w, vllmUsageChunk(12, 3))
		sseWrite(t, w, vllmDone)
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	sink := &fakeRunSink{}
	res, err := in.Run(context.Background(), &iop.RunRequest{
		Target: "Qwen/Qwen2.5-7B-Instruct", Operation: adapter.OpChat,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"continuous_usage_stats":false}}`),
	}, sink)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !reflect.DeepEqual(sink.deltas, []string{"Hello", " world"}) {
		t.Fatalf("deltas %q", sink.deltas)
	}
	if res.FinishReason != "stop" || res.Usage.GetPromptTokens() != 12 || res.Usage.GetCompletionTokens() != 3 || res.Usage.GetTotalTokens() != 15 {
		t.Fatalf("result %+v", res)
	}
	if rec.paths[0] != "/v1/chat/completions" || rec.auth[0] != "Bearer sk-node-local" {
		t.Fatalf("path %s auth %q", rec.paths[0], rec.auth[0])
	}
	b := rec.body(0)
	want := map[string]any{
		"model":          "Qwen/Qwen2.5-7B-Instruct",
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": false},
		"messages":       []any{map[string]any{"role": "user", "content": "Hi"}},
	}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("upstream body %v", b)
	}
}

func TestRunChatNativeToolCalls(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		// vLLM (hermes parser): the first delta of a call brings id, type
		// and name; the rest stream the arguments; the finish chunk carries
		// the remainder of the arguments.
		sseWrite(t, w, vllmChunk(`{"role":"assistant","content":""}`, ""))
		sseWrite(t, w, vllmChunk(`{"tool_calls":[{"id":"chatcmpl-tool-3c8f0b4f5a0e4c3c","type":"function","index":0,"function":{"name":"get_weather"}}]}`, ""))
		sseWrite(t, w, vllmChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \""}}]}`, ""))
		sseWrite(t, w, vllmChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"Paris"}}]}`, ""))
		sseWrite(t, w, vllmChunk(`{"tool_calls":[{"id":"chatcmpl-tool-9d2b1a0f9e8d7c6b","type":"function","index":1,"function":{"name":"get_weather"}}]}`, ""))
		sseWrite(t, w, vllmChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"city\": \"Lyon\"}"}}]}`, ""))
		sseWrite(t, w, vllmChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]}`, "tool_calls"))
		sseWrite(t, w, vllmUsageChunk(80, 40))
		sseWrite(t, w, vllmDone)
	})
	cfg := testConfig(srv.URL)
	cfg.ToolMode = iop.ToolMode_TOOL_MODE_NATIVE
	in := newTestInstance(t, TypeVLLM, cfg)
	sink := &fakeRunSink{}
	res, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", true)}, sink)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.FinishReason != "tool_calls" || len(sink.deltas) != 0 {
		t.Fatalf("finish %q deltas %q", res.FinishReason, sink.deltas)
	}
	if _, ok := res.Metadata[adapter.MetaTextToolFallback]; ok {
		t.Fatal("native run marked as text fallback")
	}
	jsonEqual(t, res.Metadata[adapter.MetaToolCalls], `[
		{"id":"chatcmpl-tool-3c8f0b4f5a0e4c3c","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},
		{"id":"chatcmpl-tool-9d2b1a0f9e8d7c6b","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Lyon\"}"}}]`)
	if res.Usage.GetTotalTokens() != 120 {
		t.Fatalf("usage %v", res.Usage)
	}
}

// toolFallbackServer answers like vLLM without --enable-auto-tool-choice:
// 400 for any request with tools, a text answer otherwise.
func toolFallbackServer(t *testing.T, rec *recorder, errBody string) string {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		body := rec.record(t, r)
		if _, ok := body["tools"]; ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, errBody)
			return
		}
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"role":"assistant","content":""}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":"<tool_call>{\"name\": \"get_weather\", "}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":"\"arguments\": {\"city\": \"Paris\"}}</tool_call>"}`, ""))
		sseWrite(t, w, vllmChunk(`{"content":""}`, "stop"))
		sseWrite(t, w, vllmUsageChunk(200, 20))
		sseWrite(t, w, vllmDone)
	})
	return srv.URL
}

func TestRunAutoFallsBackToTextTools(t *testing.T) {
	for name, errBody := range map[string]string{"vllm-flat": vllmToolChoiceError, "vllm-nested": vllmToolChoiceErrorV2} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			in := newTestInstance(t, TypeVLLM, testConfig(toolFallbackServer(t, rec, errBody)))
			sink := &fakeRunSink{}
			res, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput(`"You are terse."`, true)}, sink)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if rec.count() != 2 {
				t.Fatalf("%d upstream requests, want native attempt + retry", rec.count())
			}
			if res.Metadata[adapter.MetaTextToolFallback] != "true" {
				t.Fatalf("metadata %v", res.Metadata)
			}
			if _, ok := res.Metadata[adapter.MetaToolCalls]; ok {
				t.Fatal("fallback must leave tool-call parsing to the edge")
			}
			if res.FinishReason != "stop" || !strings.Contains(sink.text(), "<tool_call>") {
				t.Fatalf("finish %q text %q", res.FinishReason, sink.text())
			}
			first, second := rec.body(0), rec.body(1)
			if first["tools"] == nil || first["tool_choice"] != "auto" {
				t.Fatalf("first attempt was not native: %v", first)
			}
			for _, k := range []string{"tools", "tool_choice", "parallel_tool_calls"} {
				if _, ok := second[k]; ok {
					t.Fatalf("retry still has %q", k)
				}
			}
			if second["model"] != "m" || second["stream"] != true || second["temperature"] != 0.2 {
				t.Fatalf("retry lost fields: %v", second)
			}
			msgs := second["messages"].([]any)
			if len(msgs) != 2 {
				t.Fatalf("retry messages %v", msgs)
			}
			sys := msgs[0].(map[string]any)
			content, _ := sys["content"].(string)
			if sys["role"] != "system" || !strings.HasPrefix(content, "You are terse.\n\n") ||
				!strings.Contains(content, "get_weather") || !strings.Contains(content, `"city"`) ||
				!strings.Contains(content, `<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`) {
				t.Fatalf("system message %q", content)
			}
			if user := msgs[1].(map[string]any); user["role"] != "user" || user["content"] != "Weather in Paris?" {
				t.Fatalf("user message %v", user)
			}

			// The refusal is remembered: the next run goes straight to text.
			if _, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", true)}, &fakeRunSink{}); err != nil {
				t.Fatalf("second run: %v", err)
			}
			if rec.count() != 3 {
				t.Fatalf("%d upstream requests, want the native attempt skipped", rec.count())
			}
		})
	}
}

func TestRunTextModeSkipsNativeAttempt(t *testing.T) {
	rec := &recorder{}
	cfg := testConfig(toolFallbackServer(t, rec, vllmToolChoiceError))
	cfg.ToolMode = iop.ToolMode_TOOL_MODE_TEXT
	in := newTestInstance(t, TypeOpenAICompat, cfg)
	res, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", true)}, &fakeRunSink{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if rec.count() != 1 || res.Metadata[adapter.MetaTextToolFallback] != "true" {
		t.Fatalf("%d requests, metadata %v", rec.count(), res.Metadata)
	}
	msgs := rec.body(0)["messages"].([]any)
	if len(msgs) != 2 || msgs[0].(map[string]any)["role"] != "system" {
		t.Fatalf("instruction not inserted as the leading system message: %v", msgs)
	}
}

func TestRunNativeModeDoesNotFallBack(t *testing.T) {
	rec := &recorder{}
	cfg := testConfig(toolFallbackServer(t, rec, vllmToolChoiceError))
	cfg.ToolMode = iop.ToolMode_TOOL_MODE_NATIVE
	in := newTestInstance(t, TypeOpenAICompat, cfg)
	_, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", true)}, &fakeRunSink{})
	ae := asAdapterError(t, err)
	if ae.Code != adapter.CodeInvalidRequest || ae.HTTPStatus != http.StatusBadRequest ||
		ae.Message != `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set` {
		t.Fatalf("error %+v", ae)
	}
	if rec.count() != 1 {
		t.Fatalf("%d requests", rec.count())
	}
}

func TestRunAutoDoesNotFallBackOnOtherErrors(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		rec.record(t, r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`)
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	_, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", true)}, &fakeRunSink{})
	if ae := asAdapterError(t, err); ae.Code != adapter.CodeInvalidRequest || !strings.HasPrefix(ae.Message, "This model's maximum context length") {
		t.Fatalf("error %+v", ae)
	}
	if rec.count() != 1 {
		t.Fatalf("%d requests, want no retry", rec.count())
	}
}

func TestRunUpstreamServerError(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"EngineCore encountered an issue.","type":"InternalServerError","param":null,"code":500}}`)
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	_, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", false)}, &fakeRunSink{})
	ae := asAdapterError(t, err)
	if ae.Code != adapter.CodeUpstream || ae.HTTPStatus != 500 || ae.Message != "EngineCore encountered an issue." {
		t.Fatalf("error %+v", ae)
	}
}

func TestRunStreamErrorEvent(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"content":"par"}`, ""))
		sseWrite(t, w, `data: {"error":{"message":"engine died","type":"InternalServerError","param":null,"code":500}}`+"\n\n")
		sseWrite(t, w, vllmDone)
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	_, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", false)}, &fakeRunSink{})
	if ae := asAdapterError(t, err); ae.Code != adapter.CodeUpstream || ae.Message != "engine died" {
		t.Fatalf("error %+v", ae)
	}
}

func TestRunCancelAbortsUpstream(t *testing.T) {
	upstreamSawCancel := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"content":"thinking"}`, ""))
		select {
		case <-r.Context().Done():
			close(upstreamSawCancel)
		case <-time.After(10 * time.Second):
		}
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &fakeRunSink{ch: make(chan string, 8)}
	done := make(chan error, 1)
	go func() {
		_, err := in.Run(ctx, &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", false)}, sink)
		done <- err
	}()
	<-sink.ch
	cancel()
	select {
	case <-upstreamSawCancel:
	case <-time.After(time.Second):
		t.Fatal("upstream did not see the cancellation within 1s")
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v does not wrap context.Canceled", err)
	}
}

func TestRunCompletion(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		rec.record(t, r)
		sseHeaders(w)
		for _, s := range []string{" Paris", " is", ""} {
			fin := "null"
			if s == "" {
				fin = `"length"`
			}
			sseWrite(t, w, `data: {"id":"cmpl-7c1d","object":"text_completion","created":1727000000,"model":"m","choices":[{"index":0,"text":"`+s+`","logprobs":null,"finish_reason":`+fin+`,"stop_reason":null}],"usage":null}`+"\n\n")
		}
		sseWrite(t, w, `data: {"id":"cmpl-7c1d","object":"text_completion","created":1727000000,"model":"m","choices":[],"usage":{"prompt_tokens":4,"total_tokens":6,"completion_tokens":2}}`+"\n\n")
		sseWrite(t, w, vllmDone)
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	sink := &fakeRunSink{}
	res, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpCompletion, Input: testinput.For(adapter.OpCompletion, `{"prompt":"The capital of France","max_tokens":2}`)}, sink)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if sink.text() != " Paris is" || res.FinishReason != "length" || res.Usage.GetTotalTokens() != 6 {
		t.Fatalf("text %q result %+v", sink.text(), res)
	}
	if rec.paths[0] != "/v1/completions" || rec.body(0)["stream"] != true || rec.body(0)["prompt"] != "The capital of France" {
		t.Fatalf("request %s %v", rec.paths[0], rec.body(0))
	}
}

func TestRunEmbeddings(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		rec.record(t, r)
		w.Header().Set("Content-Type", "application/json")
		// Out of order on purpose: Output must follow index.
		_, _ = io.WriteString(w, `{"id":"embd-4f2a","object":"list","created":1727000000,"model":"BAAI/bge-m3","data":[{"index":1,"object":"embedding","embedding":[0.5,-0.25,1e-7]},{"index":0,"object":"embedding","embedding":[0.0123, -0.045, 0.3]}],"usage":{"prompt_tokens":8,"total_tokens":8,"completion_tokens":0,"prompt_tokens_details":null}}`)
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	res, err := in.Run(context.Background(), &iop.RunRequest{Target: "BAAI/bge-m3", Operation: adapter.OpEmbedding, Input: testinput.For(adapter.OpEmbedding, `{"input":["a","b"],"encoding_format":"base64"}`)}, &fakeRunSink{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if string(res.Output) != `[[0.0123,-0.045,0.3],[0.5,-0.25,1e-7]]` {
		t.Fatalf("output %s", res.Output)
	}
	if res.Usage.GetPromptTokens() != 8 || res.Usage.GetTotalTokens() != 8 {
		t.Fatalf("usage %v", res.Usage)
	}
	b := rec.body(0)
	if rec.paths[0] != "/v1/embeddings" || b["model"] != "BAAI/bge-m3" || b["encoding_format"] != nil || b["stream"] != nil {
		t.Fatalf("request %s %v", rec.paths[0], b)
	}
}

func TestEmbeddingBase64Decoded(t *testing.T) {
	// 1.0 and -2.5 as little-endian float32.
	out, _, err := embeddingOutput([]byte(`{"data":[{"index":0,"embedding":"AACAPwAAIMA="}]}`))
	if err != nil || string(out) != `[[1,-2.5]]` {
		t.Fatalf("out %s err %v", out, err)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	in := newTestInstance(t, TypeOpenAICompat, testConfig("http://127.0.0.1:1"))
	_, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: &iop.RunInput{Extra: []byte(`[1,2]`)}}, &fakeRunSink{})
	if ae := asAdapterError(t, err); ae.Code != adapter.CodeInvalidRequest {
		t.Fatalf("code %s", ae.Code)
	}
	_, err = in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: iop.RunOperation(99)}, &fakeRunSink{})
	if !errors.Is(err, adapter.ErrUnsupported) {
		t.Fatalf("unknown operation: %v", err)
	}
}

func TestToolCallDeltaVariants(t *testing.T) {
	st := &streamState{sink: &fakeRunSink{}}
	for _, ev := range []string{
		// vLLM ≥ 0.11: arguments start in the first delta, null extras.
		`{"id":"chatcmpl-be8d","object":"chat.completion.chunk","created":1765374283,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":null,"tool_calls":[{"id":"chatcmpl-tool-a331788bab1045a8","type":"function","index":0,"function":{"name":"db_list","arguments":"{\"catalog\":"}}]},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
		// Servers that null out or blank repeated fields.
		`{"choices":[{"index":0,"delta":{"content":"","tool_calls":[{"id":null,"type":null,"index":0,"function":{"name":null,"arguments":"\"main\"}"}}]},"finish_reason":""}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"","index":0,"function":{"name":"db_list","arguments":""}}]},"finish_reason":"tool_calls"}]}`,
		// A second choice is not part of the run.
		`{"choices":[{"index":1,"delta":{"content":"other","tool_calls":[{"id":"x","index":0,"function":{"name":"zzz","arguments":"{}"}}]}}]}`,
	} {
		if err := st.event([]byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := st.result()
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, res.Metadata[adapter.MetaToolCalls], `[{"id":"chatcmpl-tool-a331788bab1045a8","type":"function","function":{"name":"db_list","arguments":"{\"catalog\":\"main\"}"}}]`)
	if res.FinishReason != "tool_calls" {
		t.Fatalf("finish %q", res.FinishReason)
	}
}
