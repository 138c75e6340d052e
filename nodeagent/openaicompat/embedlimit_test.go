package openaicompat

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An embeddings response past adapter.MaxEmbeddingResponse is refused after
// reading that much, as the caller's batch being too large (no failover),
// and the upstream's remaining bytes are not read.
func TestEmbeddingResponseOverBoundRefused(t *testing.T) {
	sent := make(chan int64, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n, _ := io.WriteString(w, `{"data":[{"index":0,"embedding":[`)
		total := int64(n)
		row := strings.Repeat("0.123456789,", 1<<13) // 96 KiB
		for total < 4*adapter.MaxEmbeddingResponse {
			m, err := io.WriteString(w, row)
			total += int64(m)
			if err != nil {
				break
			}
		}
		sent <- total
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	_, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpEmbedding,
		Input: testinput.For(adapter.OpEmbedding, `{"input":["a"]}`)}, &fakeRunSink{})
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeInvalidRequest || !errors.Is(err, adapter.ErrAnswerTooLarge) {
		t.Fatalf("err = %v, want the invalid_request EmbeddingsTooLarge", err)
	}
	if n := <-sent; n >= 4*adapter.MaxEmbeddingResponse {
		t.Fatalf("upstream wrote all %d bytes: the body was drained, not abandoned", n)
	}
}
