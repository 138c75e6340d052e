package ollama

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A RunRequest comes from the Edge over the wire: whatever it holds
// (optional messages left out, a chat without sampling, odd enums) fails
// as a bad request or runs, and never panics the node.
func FuzzRunRequest(f *testing.F) {
	text := []*iop.ChatMessage{{Role: iop.ChatRole_CHAT_ROLE_USER, Content: []*iop.ContentPart{{Part: &iop.ContentPart_Text{Text: "hi"}}}}}
	for _, r := range []*iop.RunRequest{
		{RunId: "r", Operation: adapter.OpChat, Target: "llama3.2", Input: &iop.RunInput{Messages: text, Sampling: &iop.Sampling{MaxTokens: 5}}},
		{RunId: "r", Operation: adapter.OpChat, Target: "llama3.2", Input: &iop.RunInput{Messages: text}},
		{RunId: "r", Operation: adapter.OpChat, Target: "qwen3", Input: &iop.RunInput{Messages: text, Extra: []byte(`{"reasoning_effort":"high"}`)}},
		{RunId: "r", Operation: adapter.OpChat, Target: "llama3.2"},
		{RunId: "r", Operation: adapter.OpCompletion, Target: "gemma3", Input: &iop.RunInput{Prompt: "hi"}},
		{RunId: "r", Operation: adapter.OpEmbedding, Target: "all-minilm", Input: &iop.RunInput{EmbedInputs: []string{"a", "b"}}},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Ollama's answers by path; the request is read whole first, as Ollama does.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		switch r.URL.Path {
		case "/api/chat":
			_, _ = io.WriteString(w, chatLineThe+"\n"+chatLineFinal+"\n")
		case "/api/generate":
			_, _ = io.WriteString(w, genLineThat+"\n"+genLineFinal+"\n")
		case "/api/embed":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, embedResponse)
		default:
			http.NotFound(w, r)
		}
	}))
	f.Cleanup(srv.Close)
	inst := newInstance(f, &iop.AdapterConfig{BaseUrl: srv.URL})
	f.Fuzz(func(t *testing.T, b []byte) {
		var req iop.RunRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = inst.Run(ctx, &req, newSink())
	})
}
