package nodewire

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A Recv whose read deadline passes while a frame has only partly arrived
// keeps what it read: the next Recv goes on with the same frame rather
// than reading payload bytes as a length. dispatch relies on it: Cancel
// sets the read deadline to now under a waiting RecvLent, and Drain then
// reads on for the node's terminal frame.
func TestRecvTimeoutMidFrameKeepsStreamInStep(t *testing.T) {
	cst, sst, rest := midFrame(t)
	_ = sst.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := sst.RecvLent(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("first RecvLent: %v, want a timeout", err)
	}
	// The rest arrives, then the terminal frame; the owner reads on (as
	// Drain does after Cancel).
	if _, err := cst.Write(rest); err != nil {
		t.Fatal(err)
	}
	_ = sst.SetReadDeadline(time.Now().Add(time.Second))
	var got []string
	for {
		env, err := sst.RecvLent()
		if err != nil {
			got = append(got, "error: "+err.Error())
			break
		}
		ev := env.GetRunEvent()
		got = append(got, ev.GetType().String())
		if ev.GetType() == iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
			break
		}
	}
	if len(got) == 0 || got[len(got)-1] != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE.String() {
		t.Fatalf("after a mid-frame read timeout the stream never yields its terminal frame: got %q", got)
	}
}

// midFrame opens a stream on which the first half of a run's DELTA frame
// has arrived (a frame split across two mux data frames, the second one
// not here yet), and returns its sending end, its receiving end and the
// bytes that complete the frame followed by the run's COMPLETE frame.
func midFrame(t *testing.T) (cst *muxStream, sst *Stream, rest []byte) {
	t.Helper()
	client, server := muxPair(t)
	cst, _ = client.OpenStream()
	first, err := AppendFrame(nil, &iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{
		RunId: "r1", Sequence: 1, Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: strings.Repeat("d", 200)}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	second, err := AppendFrame(nil, &iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{
		RunId: "r1", Sequence: 2, Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := len(first) / 2
	if _, err := cst.Write(first[:half]); err != nil {
		t.Fatal(err)
	}
	sst = newStream(acceptWithin(t, server), 0)
	waitFor(t, "the first half to arrive", func() bool {
		sst.s.mu.Lock()
		defer sst.s.mu.Unlock()
		return len(sst.s.rbuf)-sst.s.roff == half
	})
	return cst, sst, append(first[half:len(first):len(first)], second...)
}
