package nodewire

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// lentPair opens a stream from a client session and returns both ends as
// Streams.
func lentPair(t *testing.T) (send, recv *Stream) {
	t.Helper()
	client, server := muxPair(t)
	w, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	send = newStream(w, 1<<20)
	if err := send.Send(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_STATUS, Sequence: 1, StatusCode: 200, RunId: "run_1",
		Headers: []*iop.Header{{Name: "Content-Type", Value: "text/event-stream"}}})); err != nil {
		t.Fatal(err)
	}
	return send, newStream(acceptWithin(t, server), 1<<20)
}

// keepLent is what a caller of RecvLent may keep of env past the next call:
// a lent run event's field values (strings, bytes, maps and sub-messages:
// shared, not copied), or env itself when it is not lent.
func keepLent(env *iop.Envelope) *iop.Envelope {
	ev := env.GetRunEvent()
	if ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_DELTA {
		return env
	}
	kept := &iop.RunEvent{}
	dst := kept.ProtoReflect()
	ev.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	return &iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: kept}}
}

// poisonRecvBufsFor has receive buffers overwritten as they are handed
// back until t ends (see poisonRecvBufs).
func poisonRecvBufsFor(t testing.TB) {
	poisonRecvBufs.Store(true)
	t.Cleanup(func() { poisonRecvBufs.Store(false) })
}

func runDeltaEnv(seq uint64, delta string) *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{
		RunId: "run_1", Sequence: seq, Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: delta,
		Metadata: map[string]string{"n": fmt.Sprint(seq)}, Usage: &iop.Usage{CompletionTokens: int64(seq)}}}}
}

func tunnelFrameEnv(f *iop.ProviderTunnelFrame) *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: f}}
}

// lentNext is the next envelope recv's RecvLent returns, within waitLong.
func lentNext(t *testing.T, recv *Stream) func() *iop.Envelope {
	return func() *iop.Envelope {
		t.Helper()
		_ = recv.SetReadDeadline(time.Now().Add(waitLong))
		env, err := recv.RecvLent()
		if err != nil {
			t.Fatalf("RecvLent: %v", err)
		}
		return env
	}
}

// RecvLent lends BODY frames and nothing else: envelopes of every other
// kind stay intact while later frames are received, lent frames are right
// until the next call, frames that arrive together (copied out) and one
// at a time (the receive buffer handed over) both come through, and a
// RecvLent that waits holds nothing lent.
func TestStreamRecvLent(t *testing.T) {
	poisonRecvBufsFor(t)
	send, recv := lentPair(t)
	next := lentNext(t, recv)
	status := next()
	wantStatus := proto.Clone(status)
	if status.GetProviderTunnelFrame().GetStatusCode() != 200 {
		t.Fatalf("first frame %v", status)
	}

	body := func(seq uint64) []byte { return []byte(fmt.Sprintf("data: {\"n\":%d}\n\n", seq)) }
	seq := uint64(2)
	// One at a time: each is all the stream holds when it is taken.
	for ; seq < 12; seq++ {
		if err := send.Send(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: seq, Body: body(seq)})); err != nil {
			t.Fatal(err)
		}
		f := next().GetProviderTunnelFrame()
		if f.GetSequence() != seq || !bytes.Equal(f.GetBody(), body(seq)) {
			t.Fatalf("frame %d: seq %d body %q", seq, f.GetSequence(), f.GetBody())
		}
	}
	// Run events one at a time: each is decoded straight from the receive
	// buffer the next frame reuses, and must not point into it. DELTA
	// events are lent (the next RecvLent takes their structs back), what
	// they hold is not.
	var kept []*iop.Envelope // non-BODY frames, checked at the end
	var keptWant []*iop.Envelope
	var lent *iop.RunEvent // the last DELTA received
	var lentSeq uint64
	for ; seq < 16; seq++ {
		want := runDeltaEnv(seq, string(body(seq)))
		if seq == 13 {
			// Not a DELTA: not lent.
			want = &iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{RunId: "run_1", Sequence: seq,
				Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop", Output: body(seq), Usage: &iop.Usage{PromptTokens: 3}}}}
		}
		if seq >= 14 {
			// Tunnelled requests large enough for DecodeEnvelope to
			// point their bodies into the payload, in receive buffers of
			// one size class: decoded from copies.
			want = &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: &iop.ProviderTunnelRequest{
				Adapter: "vllm", Method: "POST", Path: "/chat/completions", Body: bytes.Repeat(body(seq), 400)}}}
		}
		if err := send.Send(want); err != nil {
			t.Fatal(err)
		}
		got := next()
		if lent != nil && lent.GetSequence() == lentSeq {
			t.Fatalf("the DELTA event %d was not taken back by the next RecvLent", lentSeq)
		}
		if ev := got.GetRunEvent(); ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_DELTA {
			lent, lentSeq = ev, ev.GetSequence()
		}
		kept, keptWant = append(kept, keepLent(got)), append(keptWant, want)
	}
	if lent == nil {
		t.Fatal("no DELTA event received")
	}
	// A burst, with usage and metadata frames among the bodies, queued
	// before any is read.
	var burst []*iop.Envelope
	for i := 0; i < 20; i++ {
		f := &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: seq, Body: body(seq)}
		env := (*iop.Envelope)(nil)
		switch i % 7 {
		case 3:
			f = &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_USAGE, Sequence: seq, Usage: &iop.Usage{PromptTokens: int64(i)}}
		case 5:
			f = &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_METADATA, Sequence: seq, Metadata: map[string]string{"k": fmt.Sprint(i)}}
		case 6:
			env = runDeltaEnv(seq, string(body(seq)))
		}
		if env == nil {
			env = tunnelFrameEnv(f)
		}
		seq++
		burst = append(burst, env)
		if err := send.Queue(burst[len(burst)-1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := send.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, want := range burst {
		got := next()
		if !proto.Equal(got, want) {
			t.Fatalf("burst frame %d: got %v, want %v", i, got, want)
		}
		if got.GetProviderTunnelFrame().GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY {
			kept = append(kept, keepLent(got))
		}
	}
	end := tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, Sequence: seq, End: true, RunId: "run_1"})
	if err := send.Send(end); err != nil {
		t.Fatal(err)
	}
	// The frame before END was a BODY frame: END's RecvLent takes it back.
	kept = append(kept, next())

	// Nothing is lent while a RecvLent waits (here until its deadline).
	_ = recv.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := recv.RecvLent(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("RecvLent on a quiet stream: %v, want a deadline error", err)
	}
	recv.rmu.Lock()
	held := recv.lentBuf != nil || recv.lentEnv != nil
	recv.rmu.Unlock()
	if held {
		t.Fatal("a waiting RecvLent still holds a lent frame")
	}

	if !proto.Equal(status, wantStatus) {
		t.Fatalf("status frame changed by later frames: %v", status)
	}
	wantKept := keptWant
	for _, e := range burst {
		if e.GetProviderTunnelFrame().GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY {
			wantKept = append(wantKept, e)
		}
	}
	wantKept = append(wantKept, end)
	if len(kept) != len(wantKept) {
		t.Fatalf("%d frames kept, want %d", len(kept), len(wantKept))
	}
	for i := range kept {
		if !proto.Equal(kept[i], wantKept[i]) {
			t.Fatalf("kept frame %d changed by later frames: %v, want %v", i, kept[i], wantKept[i])
		}
	}
}

// TestAllocRecvLent: a paced stream of BODY frames, sent and received,
// allocates nothing once warm (Recv allocates the payload and its decoded
// frame). Under -race sync.Pool drops a quarter of what is put back, so
// `make test` runs this without it (and TestAllocRecvLentRunDelta).
func TestAllocRecvLent(t *testing.T) {
	frame := &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: bytes.Repeat([]byte("x"), 300)}
	best := lentAllocs(t, tunnelFrameEnv(frame), func() uint64 { frame.Sequence++; return frame.Sequence },
		func(got *iop.Envelope) bool { return got.GetProviderTunnelFrame().GetSequence() == frame.Sequence })
	if best > allocRounds/10 { // Recv costs two allocations a frame
		t.Errorf("%d allocations in the best of %d stretches of %d frames, want ~0", best, allocStretches, allocRounds)
	}
}

// TestAllocRecvLentRunDelta: a run's DELTA events, sent and received with
// RecvLent, allocate only their strings once warm (the run id and the
// delta: two a frame, against five when decoded into structs of their own,
// six when RecvLent also copied the frame).
func TestAllocRecvLentRunDelta(t *testing.T) {
	ev := &iop.RunEvent{RunId: "run_1", Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "a streamed word"}
	best := lentAllocs(t, &iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}}, func() uint64 { ev.Sequence++; return ev.Sequence },
		func(got *iop.Envelope) bool {
			return got.GetRunEvent().GetSequence() == ev.Sequence && got.GetRunEvent().GetDelta() == ev.Delta
		})
	if best > 2*allocRounds+allocRounds/10 {
		t.Errorf("%d allocations in the best of %d stretches of %d events, want ~%d", best, allocStretches, allocRounds, 2*allocRounds)
	}
}

// lentAllocs sends env over a fresh stream and receives it with RecvLent,
// round after round (next moves env to its next sequence number and
// returns it; ok checks what arrived), and returns the fewest allocations
// in a stretch of rounds once warm (fewestMallocs). It skips under -race.
func lentAllocs(t *testing.T, env *iop.Envelope, next func() uint64, ok func(*iop.Envelope) bool) uint64 {
	t.Helper()
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race; make test runs this test without it")
	}
	send, recv := lentPair(t)
	if _, err := recv.RecvLent(); err != nil { // the status frame
		t.Fatal(err)
	}
	var failed error
	round := func() {
		seq := next()
		if err := send.Send(env); err != nil {
			failed = err
			return
		}
		got, err := recv.RecvLent()
		if err != nil {
			failed = err
			return
		}
		if !ok(got) {
			failed = fmt.Errorf("round %d received %v", seq, got)
		}
	}
	for range 200 {
		round()
	}
	best := fewestMallocs(round)
	if failed != nil {
		t.Fatal(failed)
	}
	return best
}

// FrameReady is true exactly when a whole frame is unread: not before the
// first frame arrives, not for part of one, not once the last is taken.
func TestStreamFrameReady(t *testing.T) {
	send, recv := lentPair(t)
	waitReady := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(waitLong); !recv.FrameReady(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: FrameReady never true", what)
			}
		}
	}
	take := func(seq uint64) {
		t.Helper()
		_ = recv.SetReadDeadline(time.Now().Add(waitLong))
		env, err := recv.RecvLent()
		if err != nil {
			t.Fatal(err)
		}
		if got := env.GetProviderTunnelFrame().GetSequence(); got != seq {
			t.Fatalf("frame %d, want %d", got, seq)
		}
	}
	waitReady("the status frame")
	take(1)
	if recv.FrameReady() {
		t.Fatal("FrameReady with nothing unread")
	}

	// Part of a frame, written as raw stream bytes, then the rest.
	frame, err := AppendFrame(nil, tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 2, Body: bytes.Repeat([]byte("x"), 300)}), 0)
	if err != nil {
		t.Fatal(err)
	}
	half := len(frame) / 2
	if _, err := send.s.Write(frame[:half]); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitLong); ; time.Sleep(time.Millisecond) {
		recv.s.mu.Lock()
		arrived := len(recv.s.rbuf) - recv.s.roff
		recv.s.mu.Unlock()
		if arrived == half {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the first %d bytes arrived", arrived, half)
		}
	}
	if recv.FrameReady() {
		t.Fatal("FrameReady with half a frame unread")
	}
	if _, err := send.s.Write(frame[half:]); err != nil {
		t.Fatal(err)
	}
	waitReady("the rest of the frame")
	take(2)
	if recv.FrameReady() {
		t.Fatal("FrameReady after the last frame was taken")
	}

	// Two frames together: ready until both are taken.
	for seq := uint64(3); seq <= 4; seq++ {
		if err := send.Queue(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: seq, Body: []byte("y")})); err != nil {
			t.Fatal(err)
		}
	}
	if err := send.Flush(); err != nil {
		t.Fatal(err)
	}
	waitReady("two frames")
	take(3)
	if !recv.FrameReady() {
		t.Fatal("FrameReady false with the second of two frames unread")
	}
	take(4)
	if recv.FrameReady() {
		t.Fatal("FrameReady after both frames were taken")
	}
}
