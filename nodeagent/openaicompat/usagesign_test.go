package openaicompat

import (
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// A usage with negative counts (a broken server) reaches the caller as
// zero, as Ollama's does, never as a negative number of tokens in the
// answer's usage; the total is then the sum of what is left.
func TestNegativeUsageIsZero(t *testing.T) {
	res, _, err := runOnce(t, adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		sseWrite(t, w, vllmChunk(`{"content":"Hi"}`, "stop"))
		sseWrite(t, w, `data: {"choices":[],"usage":{"prompt_tokens":-5,"completion_tokens":2,"total_tokens":-3}}`+"\n\n")
		sseWrite(t, w, vllmDone)
	})
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Usage; u.GetPromptTokens() != 0 || u.GetCompletionTokens() != 2 || u.GetTotalTokens() != 2 {
		t.Fatalf("usage %v", u)
	}
}
