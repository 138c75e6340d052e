package ollama

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An embed answer cut off by Ollama (a crash mid-body) is the upstream's
// failure, which the edge may try on another candidate, as a chat stream
// cut off is: not an internal adapter error, which it reports as is.
func TestEmbedResponseCutOffIsUpstream(t *testing.T) {
	f := newFake(t)
	f.handle("/api/embed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"embeddings":[[0.1,`)
		w.(http.Flusher).Flush()
		// The connection closes without the chunked end.
		panic(http.ErrAbortHandler)
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	_, err := runEmbedding(t, inst, `{"input":["a"]}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || ae.HTTPStatus != 0 || errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want an upstream adapter error (retryable on another candidate)", err)
	}
}
