package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// As TestSteadyReaderGetsWholeAnswer, on the Anthropic surface: the
// Messages answer rendered from a held chat.completion is written in
// pieces, each under the write deadline, not as one write that must leave
// within a single write timeout.
func TestMessagesSteadyReaderGetsWholeAnswer(t *testing.T) {
	const size = 12 << 20
	filler := strings.Repeat("x", size)
	cfg := fakeNodeConfig(t)
	cfg.Limits.WriteTimeoutSec = 2
	e := startEdge(t, cfg)
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		go func() { // Owner: this node handler; stops when the stream ends.
			for {
				if _, err := st.Recv(); err != nil {
					return
				}
			}
		}()
		req := first.GetProviderTunnelRequest()
		if req == nil {
			return
		}
		body := `{"id":"c1","object":"chat.completion","model":"q","choices":[{"index":0,"message":{"role":"assistant","content":"` +
			filler + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
		frames := []*iop.ProviderTunnelFrame{statusFrame(200, jsonType)}
		for i := 0; i < len(body); i += 64 << 10 {
			frames = append(frames, bodyFrame(body[i:min(i+64<<10, len(body))]))
		}
		for i, f := range append(frames, endFrame()) {
			f.Sequence, f.RunId = uint64(i+1), req.GetRunId()
			if st.Send(tunnelFrameEnv(f)) != nil {
				return
			}
		}
		_ = st.CloseWrite()
		<-ctx.Done()
	})
	resp, n, err := readPaced(t, e.URL, "/v1/messages",
		`{"model":"qwen-7b","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, 16<<10, 10*time.Millisecond)
	if err != nil || resp.StatusCode != http.StatusOK || n < size {
		t.Fatalf("status %d, read %d bytes (answer text %d): %v", resp.StatusCode, n, size, err)
	}
	stack.WaitFor(t, waitLong, "the lease to return", func() bool { return inFlight(e, "vllm-main") == 0 })
}
