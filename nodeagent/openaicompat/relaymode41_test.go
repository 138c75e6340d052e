package openaicompat

import (
	"context"
	"net/http"
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The body is read as what the provider said it is, even when its
// Connection header nominates Content-Type (so that the header itself is
// not relayed): an event stream is split at its events and its usage
// reported.
func TestTunnelReadsTheBodyAsTheProviderTypedIt41(t *testing.T) {
	events := []string{vllmChunk(`{"content":"Hi"}`, ""), vllmChunk(`{"content":""}`, "stop"), vllmUsageChunk(4, 2), vllmDone}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "Content-Type")
		sseHeaders(w)
		for _, ev := range events {
			sseWrite(t, w, ev)
		}
	})
	in := newTestInstance(t, TypeOpenAICompat, testConfig(srv.URL))
	sink := &fakeTunnelSink{}
	err := in.Tunnel(context.Background(), &iop.ProviderTunnelRequest{Method: "POST", Path: "/chat/completions", Body: []byte(`{"stream":true}`), Stream: true}, sink)
	if err != nil {
		t.Fatalf("tunnel: %v", err)
	}
	if len(sink.usages) != 1 || sink.usages[0].GetTotalTokens() != 6 {
		t.Fatalf("usage %v: the event stream was not read as one", sink.usages)
	}
	if got := string(sink.body()); got != strings.Join(events, "") {
		t.Errorf("body %q", got)
	}
	if sink.header.Get("Content-Type") != "" {
		t.Errorf("Content-Type %q relayed, though the Connection header nominates it", sink.header.Get("Content-Type"))
	}
}
