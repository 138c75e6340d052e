package openaicompat

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A server (or a proxy) that sends a whole event stream, "[DONE]"
// included, then leaves the body open: the tunnel ends, with the stream
// relayed byte for byte and its usage reported, after afterFinishWait,
// instead of holding the provider's slot (and the caller's response, which
// the edge ends with the tunnel) until the edge gives up. Both clients are
// covered: h1client (plain http) pushes the body, http.Transport's is read.
func TestTunnelStreamLeftOpenAfterDone(t *testing.T) {
	old := afterFinishWait
	afterFinishWait = 100 * time.Millisecond
	t.Cleanup(func() { afterFinishWait = old })
	stream := vllmChunk(`{"role":"assistant","content":"Hi"}`, "") + vllmChunk(`{}`, "stop") + vllmUsageChunk(3, 1) + "data:[DONE]\r\n\r\n"
	for _, client := range []string{"h1client", "http.Transport"} {
		t.Run(client, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				sseWrite(t, w, stream)
				select { // the body is left open
				case <-release:
				case <-r.Context().Done():
				}
			})
			in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
			if client == "http.Transport" {
				// What https, HTTP/2 and proxied providers go through.
				tr := &http.Transport{}
				t.Cleanup(tr.CloseIdleConnections)
				in.client = &http.Client{Transport: tr}
			}
			sink := &fakeTunnelSink{}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			err := in.Tunnel(ctx, &iop.ProviderTunnelRequest{Method: "POST", Path: "/chat/completions"}, sink)
			if err != nil {
				t.Fatalf("tunnel: %v after %v", err, time.Since(start))
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the tunnel took %v: it waited for the body's end, not afterFinishWait", d)
			}
			if !bytes.Equal(sink.body(), []byte(stream)) {
				t.Fatalf("relayed %q", sink.body())
			}
			if len(sink.usages) != 1 || sink.usages[0].GetCompletionTokens() != 1 {
				t.Fatalf("usages %v", sink.usages)
			}
		})
	}
}
