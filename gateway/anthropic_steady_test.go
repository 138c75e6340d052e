package gateway_test

import (
	"context"
	"fmt"
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
	const size = 6 << 20
	filler := strings.Repeat("x", size)
	var e *stack.Edge
	readSteadily(t, func() (pacedAnswer, string) {
		cfg := fakeNodeConfig(t)
		cfg.Limits.WriteTimeoutSec = int(steadyWriteTimeout / time.Second)
		e = startEdge(t, cfg)
		startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
			drainStream(st)
			if req := first.GetProviderTunnelRequest(); req != nil {
				sendTunnelAnswer(st, req, `{"id":"c1","object":"chat.completion","model":"q","choices":[{"index":0,"message":{"role":"assistant","content":"`+
					filler+`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
			}
			_ = st.CloseWrite()
			<-ctx.Done()
		})
		a := readPaced(t, e.URL, "/v1/messages",
			`{"model":"qwen-7b","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, 16<<10, steadyPause)
		if a.err != nil || a.resp.StatusCode != http.StatusOK || a.n < size {
			return a, fmt.Sprintf("status %d, read %d bytes (answer text %d): %v", a.resp.StatusCode, a.n, size, a.err)
		}
		return a, ""
	})
	stack.WaitFor(t, waitLong, "the lease to return", func() bool { return inFlight(e, "vllm-main") == 0 })
}
