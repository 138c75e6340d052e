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
// each: a client on a slow link that keeps reading. It notes, for every
// read, how long the reader itself took before it (the pause and whatever
// the machine added to it; never time spent in the read waiting for
// bytes) and what it got.
type pacedReader struct {
	r     io.Reader
	piece int
	pause time.Duration
	last  time.Time // when the previous read returned
	reads []pacedRead
}

type pacedRead struct {
	own time.Duration
	n   int
}

func (p *pacedReader) Read(b []byte) (int, error) {
	time.Sleep(p.pause) // the pace itself, not synchronisation
	own := p.pause
	if !p.last.IsZero() {
		own = time.Since(p.last)
	}
	n, err := p.r.Read(b[:min(len(b), p.piece)])
	p.last = time.Now()
	p.reads = append(p.reads, pacedRead{own: own, n: n})
	return n, err
}

// slowest is the longest the reader itself took to read need bytes, over
// every run of consecutive reads; runs at the end short of need bytes
// count too (a reader that stalled just before it was cut off).
func (p *pacedReader) slowest(need int) time.Duration {
	var worst, own time.Duration
	got, j := 0, 0
	for i := range p.reads {
		for ; j < len(p.reads) && got < need; j++ {
			own += p.reads[j].own
			got += p.reads[j].n
		}
		worst = max(worst, own)
		own -= p.reads[i].own
		got -= p.reads[i].n
	}
	return worst
}

// pacedAnswer is what readPaced read, and how steadily the reader read it.
type pacedAnswer struct {
	resp *http.Response
	n    int
	err  error
	// lag is the longest the reader itself took to read steadyNeed
	// bytes (pacedReader.slowest).
	lag time.Duration
}

// readPaced sends one POST and reads the whole answer at about
// piece/pause bytes a second.
func readPaced(t *testing.T, url, path, body string, piece int, pause time.Duration) pacedAnswer {
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
	pr := &pacedReader{r: stallingConn{c}, piece: piece, pause: pause}
	resp, err := http.ReadResponse(bufio.NewReaderSize(pr, piece), nil)
	if err != nil {
		t.Fatalf("reading the answer's head: %v", err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	return pacedAnswer{resp: resp, n: int(n), err: err, lag: pr.slowest(steadyNeed)}
}

// steadyPause is how long a steady reader waits before each 16 KiB read:
// at most 546 KB/s. A socket whose send buffer (autotuned up to 4 MiB)
// wakes its blocked writer only once a third of it has drained would keep
// a write waiting 2.4 s or more at that pace, past a 2 s write timeout's
// deadline (1.875 s at least, see deadlineWriter): a reader that never
// pauses longer than 30 ms cut off as if it had stopped.
const steadyPause = 30 * time.Millisecond

// steadyWriteTimeout is limits.write_timeout_sec of the steady-reader
// tests: 6 MiB at steadyPause's pace take over five of it.
const steadyWriteTimeout = 2 * time.Second

// steadyNeed is the most one write of a whole answer waits on the reader
// for: a 64 KiB piece (wholePiece) has gone once the reader has taken two,
// the socket waking its writer each time half of its 128 KiB unsent bound
// (clientNotSentLowat) has drained. 8 reads: ~250 ms at steadyPause.
const steadyNeed = 128 << 10

// steadyAttempts bounds how often readSteadily reruns an attempt the
// reader's own stalls left undecided.
const steadyAttempts = 3

// readSteadily runs attempt (a fresh edge, one readPaced of its answer;
// problem is "" when the whole answer came) until one decides. A correct
// edge cuts a reader off only once a write has waited its whole budget
// (15/16 of the write timeout, see deadlineWriter) for the reader to take
// steadyNeed bytes, so an answer cut off while the reader never took half
// that budget of its own to read them is the defect: the test fails. A
// cut after the reader itself stalled that long proves nothing either way
// (its process starved on a loaded machine: a 30 ms pause seen to last
// 1.5 s, past the budget), and the attempt is run again.
func readSteadily(t *testing.T, attempt func() (a pacedAnswer, problem string)) pacedAnswer {
	t.Helper()
	undecided := steadyWriteTimeout * 15 / 16 / 2
	for i := 1; ; i++ {
		a, problem := attempt()
		switch {
		case problem == "":
			return a
		case a.lag < undecided:
			t.Fatalf("%s: cut off, though the reader never took more than %s of its own to read %d KiB (half the write budget: %s)",
				problem, a.lag, steadyNeed>>10, undecided)
		case i == steadyAttempts:
			t.Fatalf("%s: cut off, and in each of %d attempts the reader itself stalled (last: %s to read %d KiB, half the write budget %s): undecided",
				problem, steadyAttempts, a.lag, steadyNeed>>10, undecided)
		}
		t.Logf("attempt %d: %s, the reader itself having taken %s to read %d KiB (half the write budget: %s): undecided, rerun",
			i, problem, a.lag, steadyNeed>>10, undecided)
	}
}

// A client that keeps reading a large non-streamed answer, only slower
// than the answer can be written within limits.write_timeout_sec, gets the
// whole answer: the write timeout is for a client that stops reading, as
// for streams, not a bound on how long a whole answer may take to send.
func TestSteadyReaderGetsWholeAnswer(t *testing.T) {
	const size = 6 << 20 // over the kernel's send buffer (4 MiB), under the held bound
	filler := strings.Repeat("x", size)
	for _, tc := range []struct{ name, path, body, provider string }{
		{"tunnel", "/v1/chat/completions", `{"model":"qwen-7b","messages":[{"role":"user","content":"hi"}]}`, "vllm-main"},
		{"run", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`, "mock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *stack.Edge
			readSteadily(t, func() (pacedAnswer, string) {
				cfg := fakeNodeConfig(t)
				cfg.Limits.WriteTimeoutSec = int(steadyWriteTimeout / time.Second)
				e = startEdge(t, cfg)
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
				a := readPaced(t, e.URL, tc.path, tc.body, 16<<10, steadyPause)
				if a.err != nil || a.resp.StatusCode != http.StatusOK || strconv.Itoa(a.n) != a.resp.Header.Get("Content-Length") {
					return a, fmt.Sprintf("status %d, read %d of %s bytes: %v", a.resp.StatusCode, a.n, a.resp.Header.Get("Content-Length"), a.err)
				}
				return a, ""
			})
			stack.WaitFor(t, waitLong, "the lease to return", func() bool { return inFlight(e, tc.provider) == 0 })
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
