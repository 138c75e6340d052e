package ollama

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An embed answer one byte past the whole-answer bound is the caller's
// batch being too large (invalid_request, no failover), not a malformed
// answer from Ollama. The bound is made small, for the test only, so that
// it is reached quickly under -race; the refusal is the one at
// adapter.MaxWholeResponse.
func TestEmbedResponseOverBoundRefused(t *testing.T) {
	old := maxWholeResponse
	maxWholeResponse = 256 << 10
	t.Cleanup(func() { maxWholeResponse = old })
	bound := maxWholeResponse
	f := newFake(t)
	f.handle("/api/embed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n, _ := io.WriteString(w, `{"embeddings":[[`)
		zeros := []byte(strings.Repeat("0", 64<<10))
		for left := bound + 1 - n; left > 0; left -= len(zeros) {
			if _, err := w.Write(zeros[:min(left, len(zeros))]); err != nil {
				return // the adapter stopped reading at its bound
			}
		}
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	_, err := runEmbedding(t, inst, `{"input":["a"]}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest || !errors.Is(err, adapter.ErrAnswerTooLarge) {
		t.Fatalf("err = %v, want the invalid_request EmbeddingsTooLarge", err)
	}
}

// A negative prompt_eval_count (a broken server) is counted as zero, as
// the chat stream's counts are.
func TestEmbedNegativePromptCountIsZero(t *testing.T) {
	f := newFake(t)
	f.handle("/api/embed", jsonStatus(200, `{"embeddings":[[0.5]],"prompt_eval_count":-7}`))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	res, err := runEmbedding(t, inst, `{"input":["a"]}`)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if u := res.Usage; u == nil || u.PromptTokens != 0 || u.TotalTokens != 0 {
		t.Fatalf("usage = %v", res.Usage)
	}
}

// The configured default options (num_ctx, ...) go with embed requests
// too: the embedding model's context is one of them.
func TestEmbedSendsDefaultOptions(t *testing.T) {
	f := newFake(t)
	f.handle("/api/embed", jsonStatus(200, `{"embeddings":[[0.5]]}`))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL, Settings: map[string]string{SettingOptions: `{"num_ctx":8192}`}})
	if _, err := runEmbedding(t, inst, `{"input":["a"]}`); err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantJSON(t, "options", decodeBody(t, f.request(t).body)["options"], `{"num_ctx":8192}`)
}
