package openaicompat

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A server (or a proxy) that sends the whole answer, finish_reason and
// usage included, then leaves the stream open without "[DONE]": the answer
// is complete, so the run completes after afterFinishWait instead of
// holding its slot until the Edge gives up.
func TestFinishedStreamLeftOpen(t *testing.T) {
	old := afterFinishWait
	afterFinishWait = 200 * time.Millisecond
	t.Cleanup(func() { afterFinishWait = old })
	release := make(chan struct{})
	defer close(release)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{vllmChunk(`{"role":"assistant","content":"Hi"}`, ""), vllmChunk(`{}`, "stop"), vllmUsageChunk(3, 1)} {
			_, _ = io.WriteString(w, c)
			w.(http.Flusher).Flush()
		}
		select { // the stream is left open
		case <-release:
		case <-r.Context().Done():
		}
	})
	inst := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	res, err := inst.Run(ctx, &iop.RunRequest{RunId: "r", Operation: adapter.OpChat, Target: "m", Stream: true,
		Input: testinput.Chat(`{"messages":[{"role":"user","content":"hi"}]}`)}, &fakeRunSink{})
	if err != nil {
		t.Fatalf("run: %v after %v", err, time.Since(start))
	}
	if res.FinishReason != "stop" || res.Usage.GetCompletionTokens() != 1 {
		t.Fatalf("result %+v", res)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the run took %v: it waited for the stream's end, not afterFinishWait", d)
	}
}
