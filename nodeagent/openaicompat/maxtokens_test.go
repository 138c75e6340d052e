package openaicompat

import (
	"context"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// openAIMaxTokensRefusal is OpenAI's answer to max_tokens for its reasoning
// models (o-series, gpt-5), which take only max_completion_tokens.
const openAIMaxTokensRefusal = `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`

// reasoningModelServer answers as OpenAI does for a reasoning model: 400
// to a chat body with max_tokens, a short stream otherwise.
func reasoningModelServer(t *testing.T, rec *recorder) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body := rec.record(t, r)
		if _, ok := body["max_tokens"]; ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(openAIMaxTokensRefusal))
			return
		}
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"role":"assistant","content":"ok"}`, ""))
		sseWrite(t, w, vllmChunk(`{}`, "stop"))
		sseWrite(t, w, vllmDone)
	})
	return mux
}

// A run with max tokens against a model that takes only
// max_completion_tokens is sent again under that name, and later runs for
// the target use it at once; with tools the run stays native.
func TestMaxTokensRenamedForModelsThatRefuseIt(t *testing.T) {
	for _, tools := range []bool{false, true} {
		rec := &recorder{}
		srv := newServer(t, reasoningModelServer(t, rec).ServeHTTP)
		in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
		body := `{"messages":[{"role":"user","content":"Hi"}],"max_completion_tokens":64`
		if tools {
			body += `,"tools":` + weatherTools
		}
		req := &iop.RunRequest{Target: "o3", Operation: adapter.OpChat, Input: testinput.Chat(body + "}")}
		for run := range 2 {
			res, err := in.Run(context.Background(), req, &fakeRunSink{})
			if err != nil {
				t.Fatalf("tools %v, run %d: %v", tools, run, err)
			}
			if res.Metadata[adapter.MetaTextToolFallback] != "" {
				t.Fatalf("tools %v, run %d: fell back to text tools: %v", tools, run, res.Metadata)
			}
		}
		if n := rec.count(); n != 3 {
			t.Fatalf("tools %v: %d upstream requests, want 3 (refused, renamed, renamed at once)", tools, n)
		}
		for i := 1; i < 3; i++ {
			b := rec.body(i)
			if _, ok := b["max_tokens"]; ok || b["max_completion_tokens"] != float64(64) {
				t.Fatalf("tools %v: request %d max_tokens %v max_completion_tokens %v", tools, i, b["max_tokens"], b["max_completion_tokens"])
			}
			if _, ok := b["tools"]; ok != tools {
				t.Fatalf("tools %v: request %d tools %v", tools, i, b["tools"])
			}
		}
	}
}

// Other refusals of max_tokens (a value over the model's context, as vLLM
// words it) are the caller's error, answered once and not retried.
func TestMaxTokensOtherRefusalNotRetried(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		rec.record(t, r)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 9000.","type":"BadRequestError","param":"max_tokens","code":400}}`))
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	_, err := in.Run(context.Background(), &iop.RunRequest{
		Target: "m", Operation: adapter.OpChat,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":9000}`),
	}, &fakeRunSink{})
	if ae := asAdapterError(t, err); ae.Code != adapter.CodeInvalidRequest || ae.HTTPStatus != http.StatusBadRequest {
		t.Fatalf("error %+v", ae)
	}
	if n := rec.count(); n != 1 {
		t.Fatalf("%d upstream requests, want 1", n)
	}
}

// Legacy completions define max_tokens only: a refusal there is answered
// as is, not retried under the chat name.
func TestMaxTokensKeptOnCompletions(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		rec.record(t, r)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(openAIMaxTokensRefusal))
	})
	in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
	_, err := in.Run(context.Background(), &iop.RunRequest{
		Target: "o3", Operation: adapter.OpCompletion,
		Input: testinput.For(adapter.OpCompletion, `{"prompt":"Hi","max_tokens":5}`),
	}, &fakeRunSink{})
	if ae := asAdapterError(t, err); ae.Code != adapter.CodeInvalidRequest {
		t.Fatalf("error %+v", ae)
	}
	if n := rec.count(); n != 1 {
		t.Fatalf("%d upstream requests, want 1", n)
	}
}
