package openaicompat

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A RunRequest comes from the Edge over the wire: whatever it holds
// (optional messages left out, a chat without input, odd enums) fails as a
// bad request or runs, and never panics the node.
func FuzzRunRequest(f *testing.F) {
	for _, r := range []*iop.RunRequest{
		{RunId: "r", Operation: adapter.OpChat, Target: "m", Input: testinput.Chat(`{"messages":[{"role":"user","content":"hi"}],"temperature":0.5,"parallel_tool_calls":true}`)},
		{RunId: "r", Operation: adapter.OpChat, Target: "m"},
		{RunId: "r", Operation: adapter.OpCompletion, Target: "m", Input: &iop.RunInput{Prompt: "hi"}},
		{RunId: "r", Operation: adapter.OpEmbedding, Target: "m", Input: &iop.RunInput{EmbedInputs: []string{"a"}}},
		{RunId: "r", Operation: adapter.OpEmbedding, Target: "m"},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	srv := newServer(f, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/embeddings" {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"text":"hi","finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	})
	inst := newTestInstance(f, TypeOpenAICompat, testConfig(srv.URL))
	f.Fuzz(func(t *testing.T, b []byte) {
		var req iop.RunRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = inst.Run(ctx, &req, &fakeRunSink{})
	})
}
