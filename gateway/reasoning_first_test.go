package gateway_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// firstTokens is how many first tokens iop_time_to_first_token_seconds
// has observed.
func firstTokens(t *testing.T, reg prometheus.Gatherer) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == "iop_time_to_first_token_seconds" {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// A reasoning model thinks before it answers, often for long: its first
// reasoning piece reaches a streaming client at once, while the node has
// sent nothing else, and it is the request's first token (vLLM's own
// time to first token counts it too).
func TestFirstReasoningStreamsAtOnce(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	answer := make(chan struct{})
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		rr := first.GetRunRequest()
		if rr == nil {
			return
		}
		send := func(seq uint64, ev *iop.RunEvent) error {
			ev.RunId, ev.Sequence = rr.GetRunId(), seq
			return st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}})
		}
		if send(1, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Reasoning: "Hmm."}) != nil {
			return
		}
		select {
		case <-answer:
		case <-ctx.Done():
			return
		}
		_ = send(2, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "Hi."})
		_ = send(3, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop",
			Usage: &iop.Usage{PromptTokens: 1, CompletionTokens: 2}})
		_ = st.CloseWrite()
		<-ctx.Done()
	})
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, e.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before the reasoning came (%v)", err)
		}
		if strings.Contains(line, `"reasoning":"Hmm."`) {
			break
		}
	}
	if n := firstTokens(t, e.Registry); n != 1 {
		t.Errorf("first tokens observed while the model thinks: %d, want 1", n)
	}
	close(answer)
	rest := new(strings.Builder)
	if _, err := br.WriteTo(rest); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rest.String(), `"content":"Hi."`) || !strings.HasSuffix(rest.String(), "data: [DONE]\n\n") {
		t.Errorf("rest of the stream: %s", rest)
	}
	if n := firstTokens(t, e.Registry); n != 1 {
		t.Errorf("first tokens observed: %d, want 1", n)
	}
}
