package nodewire

import (
	"runtime"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A fence walks every exchange of a lost node holding the dispatcher's
// lock: the walk looks at the queued frames where they lie, and copies out
// only the one it answers, never the backlog (up to the window each, the
// session's 128 MiB together).
func TestFirstQueuedDoesNotCopyTheBacklog(t *testing.T) {
	body := tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 3, Body: make([]byte, 16<<10)})
	st := fenceBacklogStreams(t, 1, muxWindow, body)[0]
	const calls = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range calls {
		if _, ok := st.FirstQueuedWithin(queuedTerminalStop, 0); ok {
			t.Fatal("a terminal in a backlog of chunks")
		}
	}
	runtime.ReadMemStats(&after)
	// One decode of one 16 KiB frame per call at most (its body aliases
	// the payload); the backlog is 256 KiB.
	if per := (after.TotalAlloc - before.TotalAlloc) / calls; per > muxWindow/4 {
		t.Fatalf("a walk of a %d-byte backlog allocated %d bytes", muxWindow, per)
	}
}

// FirstQueuedWithin decodes walk frames from the first (never more than
// maxQueuedWalk), then only the last: a caller walking many streams shares
// its decodes out between them.
func TestFirstQueuedWithinDecodesWalkFramesThenTheLast(t *testing.T) {
	body := tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 3, Body: []byte("data: x\n\n")})
	end, err := AppendFrame(nil, tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, Sequence: 9, End: true}), 0)
	if err != nil {
		t.Fatal(err)
	}
	st := fenceBacklogStreams(t, 1, 64<<10, body)[0]
	frames := len(wholeFramesRef(st.s.rbuf, st.maxFrame))
	if frames <= maxQueuedWalk+1 {
		t.Fatalf("a backlog of %d frames: too few", frames)
	}
	st.s.rbuf = append(st.s.rbuf, end...)
	for _, c := range []struct{ walk, seen int }{{-1, 1}, {0, 1}, {1, 2}, {7, 8}, {maxQueuedWalk, maxQueuedWalk + 1}, {maxQueuedWalk * 4, maxQueuedWalk + 1}} {
		seen := 0
		env, ok := st.FirstQueuedWithin(func(env *iop.Envelope) bool { seen++; return queuedTerminalStop(env) }, c.walk)
		if seen != c.seen {
			t.Errorf("walk %d: stop saw %d frames, want %d", c.walk, seen, c.seen)
		}
		if !ok || env.GetProviderTunnelFrame().GetSequence() != 9 {
			t.Errorf("walk %d: FirstQueuedWithin = %v, %v: want the END, the last frame", c.walk, env, ok)
		}
	}
}

// The frame FirstQueued answers is decoded from a copy of its own: a body
// the decoder points into the payload (a tunnel BODY frame's) stays as it
// was when the stream's buffer is reused for later frames.
func TestFirstQueuedAnswerOwnsItsBytes(t *testing.T) {
	body := make([]byte, 8<<10)
	for i := range body {
		body[i] = 'x'
	}
	st := fenceBacklogStreams(t, 1, 64<<10, tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 3, Body: body}))[0]
	env, ok := st.FirstQueued(func(*iop.Envelope) bool { return true })
	if !ok {
		t.Fatal("FirstQueued found no frame")
	}
	for i := range st.s.rbuf {
		st.s.rbuf[i] = 0
	}
	if got := env.GetProviderTunnelFrame().GetBody(); string(got) != string(body) {
		t.Fatal("the envelope FirstQueued answered changed with the stream's buffer")
	}
}
