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

// smallWholeResponse sets the bound of an answer read whole to a size
// read quickly under -race, for the test only; the refusal at it is the
// one at adapter.MaxWholeResponse.
func smallWholeResponse(t *testing.T) int {
	t.Helper()
	old := maxWholeResponse
	maxWholeResponse = 256 << 10
	t.Cleanup(func() { maxWholeResponse = old })
	return maxWholeResponse
}

// An embeddings response past the whole-answer bound is refused after
// reading that much, as the caller's batch being too large (no failover),
// and the upstream's remaining bytes are not read.
func TestEmbeddingResponseOverBoundRefused(t *testing.T) {
	smallWholeResponse(t)
	sent := make(chan int64, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n, _ := io.WriteString(w, `{"data":[{"index":0,"embedding":[`)
		total := int64(n)
		row := strings.Repeat("0.123456789,", 1<<13) // 96 KiB
		for total < 4*adapter.MaxWholeResponse {
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
	if n := <-sent; n >= 4*adapter.MaxWholeResponse {
		t.Fatalf("upstream wrote all %d bytes: the body was drained, not abandoned", n)
	}
}

// A whole JSON chat answer (a server that ignored "stream") past the
// whole-answer bound is refused as too large, not as unreadable.
func TestWholeChatAnswerOverBoundRefused(t *testing.T) {
	bound := smallWholeResponse(t)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"`)
		row := strings.Repeat("x", 96<<10)
		for n := 0; n < bound+len(row); n += len(row) {
			if _, err := io.WriteString(w, row); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `"},"finish_reason":"stop"}]}`)
	})
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	_, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Stream: true,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"hi"}]}`)}, &fakeRunSink{})
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || !errors.Is(err, adapter.ErrAnswerTooLarge) {
		t.Fatalf("err = %v, want AnswerTooLarge", err)
	}
}
