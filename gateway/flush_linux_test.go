package gateway_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// burstChunks is how many chunks the fake node sends in one write: more
// than four times the edge's bound on writes left unflushed (16), and not
// a multiple of it, so that the last few are flushed only because the edge
// is about to wait.
const burstChunks = 4*16 + 6

// burstCase is a streamed request whose answer the fake node sends as a
// burst: burst sends the answer's head (if any), burstChunks chunks whose
// text is "w0 ", "w1 " … and a frame or event that writes nothing, in one
// write; rest ends the answer.
type burstCase struct {
	name, path, body string
	end              string // what the stream's end carries
	burst, rest      func(st *nodewire.Stream, first *iop.Envelope) error
}

// A burst of chunks that reaches the edge together leaves for the client in
// a few writes, not one per chunk, and none of it waits in a buffer while
// the edge waits for the node: the node holds its stream open after the
// burst until the client has every chunk. On the tunnel (SSE relayed as
// is), the run route (events rendered as chat chunks) and the Anthropic
// surface (chunks converted) alike.
func TestStreamBurstLeavesTogether(t *testing.T) {
	sse := &iop.Header{Name: "Content-Type", Value: "text/event-stream"}
	chat := func(model string) string {
		return `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"go"}]}`
	}
	tunnel := burstCase{
		name: "tunnel", path: "/v1/chat/completions", body: chat("qwen-7b"), end: "data: [DONE]",
		burst: func(st *nodewire.Stream, first *iop.Envelope) error {
			runID := first.GetProviderTunnelRequest().GetRunId()
			frames := []*iop.ProviderTunnelFrame{statusFrame(200, sse)}
			for i := 0; i < burstChunks; i++ {
				frames = append(frames, bodyFrame(chunk(fmt.Sprintf(`{"content":"w%d "}`, i), "null")))
			}
			frames = append(frames, &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE, Usage: &iop.Usage{PromptTokens: 3}})
			return queueFrames(st, runID, 1, frames)
		},
		rest: func(st *nodewire.Stream, first *iop.Envelope) error {
			runID := first.GetProviderTunnelRequest().GetRunId()
			return queueFrames(st, runID, burstChunks+3, []*iop.ProviderTunnelFrame{bodyFrame(sseDone), endFrame()})
		},
	}
	run := burstCase{
		name: "run", path: "/v1/chat/completions", body: chat("demo"), end: "data: [DONE]",
		burst: func(st *nodewire.Stream, first *iop.Envelope) error {
			runID := first.GetRunRequest().GetRunId()
			for i := 0; i <= burstChunks; i++ {
				delta := fmt.Sprintf("w%d ", i)
				if i == burstChunks {
					delta = "" // writes nothing
				}
				ev := &iop.RunEvent{RunId: runID, Sequence: uint64(i + 1), Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: delta}
				if err := st.Queue(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}}); err != nil {
					return err
				}
			}
			return st.Flush()
		},
		rest: func(st *nodewire.Stream, first *iop.Envelope) error {
			ev := &iop.RunEvent{RunId: first.GetRunRequest().GetRunId(), Sequence: burstChunks + 2, Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop"}
			return st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}})
		},
	}
	anthropic := tunnel
	anthropic.name, anthropic.path, anthropic.end = "anthropic", "/v1/messages", "event: message_stop"
	anthropic.body = `{"model":"qwen-7b","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"go"}]}`
	for _, tc := range []burstCase{tunnel, run, anthropic} {
		t.Run(tc.name, func(t *testing.T) { testBurst(t, tc) })
	}
}

func testBurst(t *testing.T, tc burstCase) {
	e := startEdge(t, fakeNodeConfig(t))
	release := make(chan struct{})
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		if err := tc.burst(st, first); err != nil {
			t.Errorf("burst: %v", err)
			return
		}
		select {
		case <-release:
		case <-ctx.Done():
			return
		}
		if err := tc.rest(st, first); err != nil {
			t.Errorf("end: %v", err)
		}
		_ = st.CloseWrite()
	})

	conn, br := rawStream(t, e.URL, tc.path, tc.body)
	// Every chunk of the burst arrives while the node still holds the
	// stream: nothing was left in a buffer for its end.
	for got := 0; got < burstChunks; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d of %d chunks: %v", got, burstChunks, err)
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, fmt.Sprintf(`:"w%d "`, got)) {
			got++
		}
	}
	segs := segmentsIn(t, conn)
	close(release)
	if rest := readRest(t, br); !strings.Contains(rest, tc.end) {
		t.Fatalf("the stream's end has no %q: %q", tc.end, rest)
	}
	// One write per chunk would be burstChunks segments. The head, one
	// flush per 16 chunks, one before the wait, and net/http's buffers
	// filling come to about ten.
	t.Logf("%d chunks in one burst reached the client in %d TCP segments", burstChunks, segs)
	if segs >= burstChunks/4 {
		t.Errorf("%d chunks arrived in %d segments: written one by one", burstChunks, segs)
	}
}

// segmentsIn is how many TCP segments conn has received (tcpi_segs_in):
// on loopback, one per write of the peer that carried data, plus its few
// bare acknowledgements.
func segmentsIn(t *testing.T, conn net.Conn) uint32 {
	t.Helper()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var ierr error
	if err := raw.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		t.Fatal(err)
	}
	if ierr != nil {
		t.Fatalf("TCP_INFO: %v", ierr)
	}
	return info.Segs_in
}
