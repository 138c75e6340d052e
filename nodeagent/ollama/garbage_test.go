package ollama

import (
	"context"
	"errors"
	"github.com/iop-gateway/iop/internal/testinput"
	"io"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

const htmlPage = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n"

// TestGarbageIsUpstreamError: a 200 that is not a complete answer from the
// endpoint is an upstream error, never an empty success.
func TestGarbageIsUpstreamError(t *testing.T) {
	cases := []struct {
		name     string
		op       iop.RunOperation
		h        http.HandlerFunc
		sentinel error
	}{
		{"html as json", adapter.OpChat, jsonStatus(200, htmlPage), ErrMalformedLine},
		{"html page", adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, htmlPage)
		}, ErrMalformedLine},
		{"empty body", adapter.OpChat, ndjson(), ErrStreamTruncated},
		{"blank lines only", adapter.OpChat, ndjson("", "  ", ""), ErrStreamTruncated},
		{"done without message", adapter.OpChat, ndjson(`{"model":"llama3.2","created_at":"2023-08-04T19:22:45.499127Z","done":true}`), ErrNoAnswer},
		{"generate lines on chat", adapter.OpChat, ndjson(genLineThat, genLineFinal), ErrNoAnswer},
		{"chat lines on generate", adapter.OpCompletion, ndjson(chatLineThe, chatLineFinal), ErrNoAnswer},
		{"generate cut before done", adapter.OpCompletion, ndjson(genLineThat, genLineQ), ErrStreamTruncated},
		{"openai sse on generate", adapter.OpCompletion, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"text\":\"x\"}]}\n\ndata: [DONE]\n\n")
		}, ErrMalformedLine},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			path, input := "/api/chat", simpleChat
			if c.op == adapter.OpCompletion {
				path, input = "/api/generate", `{"prompt":"Why is the sky blue?"}`
			}
			f.handle(path, c.h)
			inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
			res, err := inst.Run(context.Background(), &iop.RunRequest{Operation: c.op, Target: "llama3.2", Input: testinput.For(c.op, input)}, newSink())
			var ae *adapter.Error
			if res != nil || !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || ae.Message == "" || !errors.Is(err, c.sentinel) {
				t.Fatalf("res %+v err = %v, want upstream_error wrapping %v", res, err, c.sentinel)
			}
		})
	}
}

func TestEmbedGarbageIsUpstreamError(t *testing.T) {
	for _, body := range []string{htmlPage, `{}`, `{"embeddings":null}`, `{"embeddings":[]}`, `{"model":"all-minilm","embeddings":[[0.1]]`} {
		f := newFake(t)
		f.handle("/api/embed", jsonStatus(200, body))
		inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
		res, err := runEmbedding(t, inst, `{"input":"x"}`)
		var ae *adapter.Error
		if res != nil || !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream {
			t.Fatalf("%q: res %+v err = %v", body, res, err)
		}
	}
}
