package nodewire

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An edge that stops reading (overloaded, or a stalled path that still
// delivers its heartbeats) makes the node's writer give up after
// muxWriteTimeout. That is the close cause the node records and reports
// (dispatch's closeReason maps the same error to "node stopped reading" on
// the edge's side), never ErrHeartbeatTimeout: heartbeats kept arriving.
// The session's failure reaches the heartbeat receiver as a Recv error
// wrapping the write's timeout, and it used to take that for its own read
// deadline — in most runs, whichever goroutine won the race to close.
func TestPeerThatStopsReadingIsNotAHeartbeatTimeout(t *testing.T) {
	old := muxWriteTimeout
	t.Cleanup(func() { muxWriteTimeout = old })
	for i := range 8 {
		peerStopsReadingCause(t, i, old)
	}
}

func peerStopsReadingCause(t *testing.T, try int, writeTimeout time.Duration) {
	e := startRawEdge(t)
	cc, c := rawEdgeReady(t, e, DialConfig{}, &iop.HeartbeatConfig{IntervalMs: 20, TimeoutMs: 60_000})
	// Only the exchange below runs under the short write timeout: under
	// it, a write of the ready exchange stalled that long (a loaded
	// machine) ended the session before the edge had read it. The writer
	// reads the timeout under wmu, with each batch.
	sess := cc.sess.Load()
	sess.wmu.Lock()
	muxWriteTimeout = 100 * time.Millisecond
	sess.wmu.Unlock()
	stop := stopReadingWithHeartbeats(t, cc, c)
	defer stop()
	waitDone(t, cc.Conn, waitLong, "node conn whose edge stopped reading")
	err := cc.Err()
	if errors.Is(err, ErrHeartbeatTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("try %d: close cause %v, want the write's timeout, not ErrHeartbeatTimeout", try, err)
	}
	_ = cc.Close() // waits for the session's writer
	muxWriteTimeout = writeTimeout
	_, _ = io.Copy(io.Discard, c) // the node hung up: its socket ends
}

// An edge that opens streams and ends none (broken, or not the edge: an
// open is a 12-byte frame) has every open past muxMaxPeerStreams reset on
// arrival, its payload dropped, instead of each costing the node a stream
// and, once served, a handler goroutine: 100,000 opens of 50 bytes each
// used to cost the node 100,000 goroutines and 550 MB. An exchange that
// ends makes room for the next.
func TestNodeBoundsStreamsTheEdgeHasOpen(t *testing.T) {
	old := muxMaxPeerStreams
	muxMaxPeerStreams = 4
	t.Cleanup(func() { muxMaxPeerStreams = old })
	e := startRawEdge(t)
	cc, c := rawEdgeReady(t, e, DialConfig{}, &iop.HeartbeatConfig{IntervalMs: 1000, TimeoutMs: 60_000})
	resets := edgeResets(c)

	// Nobody serves yet (the node may still be applying its config): the
	// opens wait for Accept.
	for i := range 7 {
		writeMuxEnvelope(t, c, flagSYN, uint32(2+2*i), runRequest("r"))
	}
	expectResets(t, resets, 10, 12, 14)
	if n := cc.numStreams(); n != 4+1 {
		t.Fatalf("node holds %d streams, want 4 and its control stream", n)
	}
	// The edge resets one: the next open takes its place, and only that.
	if _, err := c.Write(rawHeader(muxTypeData, flagRST, 2, 0)); err != nil {
		t.Fatal(err)
	}
	writeMuxEnvelope(t, c, flagSYN, 16, runRequest("r"))
	writeMuxEnvelope(t, c, flagSYN, 18, runRequest("r"))
	expectResets(t, resets, 18)

	// Those the node took are served.
	served := make(chan uint32, 8)
	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		served <- st.ID()
		st.Abort()
	})
	got := map[uint32]bool{}
	for range 4 {
		select {
		case id := <-served:
			got[id] = true
		case <-time.After(waitLong):
			t.Fatalf("served %v; want streams 4, 6, 8 and 16", got)
		}
	}
	if !got[4] || !got[6] || !got[8] || !got[16] {
		t.Fatalf("served %v; want streams 4, 6, 8 and 16", got)
	}
}

// Serve runs at most maxServeHandlers handlers at once. The session bounds
// the streams the edge has open, but a handler outlives its stream's place
// there when the edge resets the stream while the handler works (a
// provider call that has not yet noticed): an edge that opens and resets
// streams in a loop used to start a goroutine for each. A stream that
// finds every handler busy is reset at once.
func TestServeBoundsHandlers(t *testing.T) {
	old := maxServeHandlers
	maxServeHandlers = 4
	t.Cleanup(func() { maxServeHandlers = old })
	e := startRawEdge(t)
	cc, c := rawEdgeReady(t, e, DialConfig{}, &iop.HeartbeatConfig{IntervalMs: 1000, TimeoutMs: 60_000})
	resets := edgeResets(c)

	var running, peak atomic.Int32
	started := make(chan uint32, 16)
	release := make(chan struct{})
	var releaseOnce atomic.Bool
	releaseAll := func() {
		if releaseOnce.CompareAndSwap(false, true) {
			close(release)
		}
	}
	t.Cleanup(releaseAll)
	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		started <- st.ID()
		select {
		case <-release:
		case <-ctx.Done():
		}
		running.Add(-1)
		st.Abort()
	})
	waitStarted := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-started:
			case <-time.After(waitLong):
				t.Fatalf("handlers did not start (%d running)", running.Load())
			}
		}
	}
	for i := range 4 {
		writeMuxEnvelope(t, c, flagSYN, uint32(2+2*i), runRequest("r"))
	}
	waitStarted(4)
	// The edge resets them: the session forgets them, their handlers work on.
	for i := range 4 {
		if _, err := c.Write(rawHeader(muxTypeData, flagRST, uint32(2+2*i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the node to forget the reset streams", func() bool { return cc.numStreams() == 1 })
	for i := range 3 {
		writeMuxEnvelope(t, c, flagSYN, uint32(10+2*i), runRequest("r"))
	}
	expectResets(t, resets, 10, 12, 14)
	if p := peak.Load(); p != 4 {
		t.Fatalf("%d handlers ran at once, want at most 4", p)
	}
	// Once the handlers return, the next open is served.
	releaseAll()
	waitFor(t, "the handlers to return", func() bool { return running.Load() == 0 })
	writeMuxEnvelope(t, c, flagSYN, 16, runRequest("r"))
	select {
	case id := <-started:
		if id != 16 {
			t.Fatalf("served stream %d, want 16", id)
		}
	case <-time.After(waitLong):
		t.Fatal("a stream opened after the handlers returned was not served")
	}
	expectResets(t, resets)
}

// An edge's refusal carries a reason the node logs: a reason as long as
// a frame allows is kept to maxReasonBytes (whole UTF-8), the code intact.
func TestRejectionReasonIsBounded(t *testing.T) {
	e := startRawEdge(t)
	errc := make(chan error, 1)
	// Owner: the test; Dial ends when the edge answers (or its timeout).
	// The bound is generous: the edge builds and writes a 2 MiB answer
	// while the clock runs, and a loaded machine under -race took 5 s.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*waitLong)
		defer cancel()
		_, _, err := Dial(ctx, DialConfig{Address: e.addr(), HandshakeTimeout: 4 * waitLong},
			&iop.RegisterRequest{ProtocolVersion: ProtocolVersion, NodeId: "n", Token: "t"})
		errc <- err
	}()
	c := e.accept(t)
	readHello(t, c)
	reason := strings.Repeat("é", 1<<20) // 2 MiB
	if err := WriteFrame(c, &iop.Envelope{Body: &iop.Envelope_RegisterResponse{RegisterResponse: &iop.RegisterResponse{
		RejectCode: iop.RejectCode_REJECT_CODE_CREDENTIALS, Reason: reason,
	}}}, DefaultMaxFrameSize); err != nil {
		t.Fatal(err)
	}
	var rej *RejectedError
	if err := <-errc; !errors.As(err, &rej) || rej.Code != iop.RejectCode_REJECT_CODE_CREDENTIALS {
		t.Fatalf("dial: %v, want a credentials rejection", err)
	}
	if n := len(rej.Reason); n > maxReasonBytes+len("…") || !utf8.ValidString(rej.Reason) || !strings.HasPrefix(reason, strings.TrimSuffix(rej.Reason, "…")) {
		t.Fatalf("reason kept: %d bytes (valid UTF-8 %v), want at most %d of the edge's", n, utf8.ValidString(rej.Reason), maxReasonBytes)
	}
}

// stopReadingWithHeartbeats plays an edge that opens one exchange, grants
// the node a window large enough to fill both sockets' buffers, then reads
// nothing more while its heartbeats keep coming (every 10 ms), and has the
// node send until a send fails. The returned func stops the heartbeats
// and waits for their goroutine.
func stopReadingWithHeartbeats(t *testing.T, cc *ClientConn, c net.Conn) (stop func()) {
	t.Helper()
	writeMuxEnvelope(t, c, flagSYN, 2, runRequest("r1"))
	if _, err := c.Write(rawHeader(muxTypeWindow, 0, 2, 1<<30)); err != nil {
		t.Fatal(err)
	}
	stopBeats := make(chan struct{})
	beatsDone := make(chan struct{})
	// Owner: the calling test, through stop; stops at stopBeats or when the
	// node hangs up.
	go func() {
		defer close(beatsDone)
		hb := &iop.Envelope{Body: &iop.Envelope_Heartbeat{Heartbeat: &iop.Heartbeat{Sequence: 1}}}
		frame, _ := AppendFrame(nil, hb, 0)
		msg := append(rawHeader(muxTypeData, 0, 1, uint32(len(frame))), frame...)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopBeats:
				return
			case <-tick.C:
			}
			_ = c.SetWriteDeadline(time.Now().Add(waitLong))
			if _, err := c.Write(msg); err != nil {
				return
			}
		}
	}()
	body := tunnelBodyEnvelope(MaxBodyChunk)
	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		for st.Send(body) == nil {
		}
		st.Abort()
	})
	return func() { close(stopBeats); <-beatsDone }
}
