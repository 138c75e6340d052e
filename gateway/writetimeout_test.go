package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A client of the Anthropic surface that stops reading its stream must be
// cut off by limits.write_timeout_sec (write_error) and its lease return,
// as on the OpenAI surface (TestSlowReaderDoesNotStallOthers).
func TestAnthropicStreamWriteTimeout(t *testing.T) {
	big := strings.Repeat("x", 48<<10)
	// Each chunk the upstream sends is progress: the stream fills the
	// client's, the edge's and the wire's buffers at whatever pace the
	// machine allows before the edge's write blocks, and only from there
	// does the 1 s write timeout run. Once it blocks, the upstream soon
	// blocks too (or ends), so a write timeout that never fires fails the
	// test after waitLong without progress.
	p := newProgress()
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		for i := 0; i < 4000; i++ {
			if _, err := fmt.Fprint(w, chunk(`{"content":"`+big+`"}`, "null")); err != nil {
				return
			}
			f.Flush()
			p.step()
			select {
			case <-time.After(2 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, chunk(`{"content":""}`, `"stop"`), sseDone)
	})
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("vllm-main", u.baseURL())}, modelOn("qwen-7b", "vllm-main", target))
	cfg.Limits.WriteTimeoutSec = 1
	e, _ := startStack(t, cfg)

	a := stalledClient(t, e.URL, "/v1/messages", "anthropic-version: 2023-06-01\r\n",
		`{"model":"qwen-7b","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"A"}]}`)
	defer a.Close()
	stack.WaitFor(t, waitLong, "the stream to start", func() bool { return inFlight(e, "vllm-main") == 1 })
	firstByte(t, a)
	waitWhileProgressing(t, p, "a write_error after the client stopped reading", func() bool {
		return cancellations(t, e, "write_error") > 0
	})
	waitReleased(t, e, "vllm-main")
	if got := cancellations(t, e, "write_error"); got != 1 {
		t.Fatalf("write_error cancellations = %v, want 1", got)
	}
}

// waitWhileProgressing waits until cond holds, failing only when p saw no
// step for waitLong (see progress).
func waitWhileProgressing(t *testing.T, p progress, what string, cond func() bool) {
	t.Helper()
	idle := time.NewTimer(waitLong)
	defer idle.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-p:
			idle.Reset(waitLong)
		case <-poll.C:
		case <-idle.C:
			t.Fatalf("no progress for %s waiting for %s", waitLong, what)
		}
	}
}

// A client that stops reading a large non-streamed run answer is cut off
// by limits.write_timeout_sec and the run's lease returned, as the
// tunnel's held answer (writeHeld) and every stream are.
func TestRunWholeAnswerWriteTimeout(t *testing.T) {
	cfg := fakeNodeConfig(t)
	cfg.Limits.WriteTimeoutSec = 1
	e := startEdge(t, cfg)
	const events = 1 + 128 + 1 // START, the deltas, COMPLETE
	sent := make(chan struct{}, events)
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		runID := first.GetRunRequest().GetRunId()
		go func() { // Owner: this node handler; stops when the stream ends.
			for {
				if _, err := st.Recv(); err != nil {
					return
				}
			}
		}()
		seq := uint64(0)
		send := func(ev *iop.RunEvent) error {
			seq++
			ev.RunId, ev.Sequence = runID, seq
			if err := st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}}); err != nil {
				return err
			}
			sent <- struct{}{} // never blocks: room for every event
			return nil
		}
		_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START})
		delta := strings.Repeat("x", 64<<10)
		for i := 0; i < 128; i++ { // 8 MiB of answer
			if send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: delta}) != nil {
				return
			}
		}
		_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop",
			Usage: &iop.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}})
		_ = st.CloseWrite()
		<-ctx.Done()
	})

	a := stalledClient(t, e.URL, "/v1/chat/completions", "", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`)
	defer a.Close()
	stack.WaitFor(t, waitLong, "the run to start", func() bool { return inFlight(e, "mock") == 1 })
	// Each wait follows the event before it, not the run's start: the
	// 8 MiB pass through the wire (one event at a time) and the aggregator
	// at whatever pace the machine allows before the edge writes its first
	// byte, and only from there does the 1 s write timeout run.
	for i := 0; i < events; i++ {
		waitFor(t, sent, waitLong, fmt.Sprintf("the node to send event %d of %d", i+1, events))
	}
	firstByte(t, a)
	stack.WaitFor(t, waitLong, "a write_error after the edge began writing", func() bool { return cancellations(t, e, "write_error") > 0 })
	waitReleased(t, e, "mock")
	if got := cancellations(t, e, "write_error"); got != 1 {
		t.Fatalf("write_error cancellations = %v, want 1", got)
	}
}

// firstByte waits until the edge has written the first byte of its answer
// to a, reading only that byte (the rest stays unread).
func firstByte(t *testing.T, a *net.TCPConn) {
	t.Helper()
	if err := a.SetReadDeadline(time.Now().Add(waitLong)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Read(make([]byte, 1)); err != nil {
		t.Fatalf("waiting for the answer's first byte: %v", err)
	}
}

// stalledClient sends one POST and never reads, with a small receive
// buffer so the edge's writes fill the socket soon.
func stalledClient(t *testing.T, url, path, extraHeaders, body string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	a := c.(*net.TCPConn)
	_ = a.SetReadBuffer(4096)
	fmt.Fprintf(a, "POST %s HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", path, extraHeaders, len(body), body)
	return a
}
