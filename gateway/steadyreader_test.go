package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// pacedReader reads at most piece bytes per Read and waits pause before
// each: a client on a slow link that keeps reading.
type pacedReader struct {
	r     io.Reader
	piece int
	pause time.Duration
}

func (p *pacedReader) Read(b []byte) (int, error) {
	time.Sleep(p.pause) // the pace itself, not synchronisation
	return p.r.Read(b[:min(len(b), p.piece)])
}

// readPaced sends one POST and reads the whole answer at about
// piece/pause bytes a second.
func readPaced(t *testing.T, url, path, body string, piece int, pause time.Duration) (*http.Response, int, error) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(128 << 10) // the edge cannot hand the answer to the kernel at once
	// Bounds on a hang, not on the answer's length (see stallLimit).
	_ = c.SetWriteDeadline(time.Now().Add(stallLimit))
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReaderSize(&pacedReader{r: stallingConn{c}, piece: piece, pause: pause}, piece), nil)
	if err != nil {
		t.Fatalf("reading the answer's head: %v", err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	return resp, int(n), err
}

// steadyPause is how long a steady reader waits before each 16 KiB read:
// at most 546 KB/s. A socket whose send buffer (autotuned up to 4 MiB)
// wakes its blocked writer only once a third of it has drained would keep
// a write waiting 2.4 s or more at that pace, past a 2 s write timeout's
// deadline (1.875 s at least, see deadlineWriter): a reader that never
// pauses longer than 30 ms cut off as if it had stopped.
const steadyPause = 30 * time.Millisecond

// A client that keeps reading a large non-streamed answer, only slower
// than the answer can be written within limits.write_timeout_sec, gets the
// whole answer: the write timeout is for a client that stops reading, as
// for streams, not a bound on how long a whole answer may take to send.
func TestSteadyReaderGetsWholeAnswer(t *testing.T) {
	const size = 6 << 20 // over the kernel's send buffer (4 MiB), under the held bound
	filler := strings.Repeat("x", size)
	for _, tc := range []struct{ name, path, body string }{
		{"tunnel", "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`},
		{"run", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fakeNodeConfig(t)
			cfg.Limits.WriteTimeoutSec = 2
			e := startEdge(t, cfg)
			startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
				drainStream(st)
				if req := first.GetProviderTunnelRequest(); req != nil {
					sendTunnelAnswer(st, req, `{"object":"chat.completion","pad":"`+filler+`"}`)
				} else {
					runID := first.GetRunRequest().GetRunId()
					seq := uint64(0)
					send := func(ev *iop.RunEvent) error {
						seq++
						ev.RunId, ev.Sequence = runID, seq
						return st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}})
					}
					_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START})
					for i := 0; i < size; i += 64 << 10 {
						if send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: filler[i:min(i+64<<10, size)]}) != nil {
							return
						}
					}
					_ = send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop",
						Usage: &iop.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}})
				}
				_ = st.CloseWrite()
				<-ctx.Done()
			})
			// At most 546 KB/s: 6 MiB take 11.5 s or more, over five write
			// timeouts, with no pause longer than steadyPause.
			resp, n, err := readPaced(t, e.URL, tc.path, tc.body, 16<<10, steadyPause)
			if err != nil || resp.StatusCode != http.StatusOK || strconv.Itoa(n) != resp.Header.Get("Content-Length") {
				t.Fatalf("status %d, read %d of %s bytes: %v", resp.StatusCode, n, resp.Header.Get("Content-Length"), err)
			}
			stack.WaitFor(t, waitLong, "the lease to return", func() bool { return inFlight(e, map[string]string{"tunnel": "vllm-main", "run": "mock"}[tc.name]) == 0 })
			if got := cancellations(t, e, "write_error"); got != 0 {
				t.Fatalf("write_error cancellations = %v, want 0", got)
			}
		})
	}
}

// drainStream reads and drops what the edge sends on st, on a goroutine of
// its own, until the stream ends.
func drainStream(st *nodewire.Stream) {
	go func() { // Owner: the node handler's stream; stops when it ends.
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	}()
}

// sendTunnelAnswer answers req with a 200 JSON body in 64 KiB BODY frames
// and an END (a held, non-streamed answer).
func sendTunnelAnswer(st *nodewire.Stream, req *iop.ProviderTunnelRequest, body string) {
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
}
