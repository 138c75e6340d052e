package nodewire

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// deltaFrameOf returns a run event whose frame is exactly size bytes.
func deltaFrameOf(t *testing.T, size int) *iop.Envelope {
	t.Helper()
	for n := size - 64; n < size; n++ {
		env := runDeltaEnv(1, strings.Repeat("x", n))
		b, err := AppendFrame(nil, env, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == size {
			return env
		}
	}
	t.Fatalf("no run event frames to %d bytes", size)
	return nil
}

// A send whose deadline passes after part of its frame went out (the peer
// stopped granting window credit) leaves the stream unusable: every later
// send fails with ErrStreamCut instead of writing a frame the peer would
// read as the rest of the cut one. The control stream's senders rely on
// it (SendLoad closes the connection on it).
func TestSendCutMidFrameFailsLaterSends(t *testing.T) {
	client, server := muxPair(t)
	ms, _ := client.OpenStream()
	st := newStream(ms, 0)
	if err := st.Send(runDeltaEnv(1, "open")); err != nil {
		t.Fatal(err)
	}
	_ = acceptWithin(t, server) // and never read: no credit comes back

	big := deltaFrameOf(t, muxWindow+4096)
	err := st.SendBy(big, time.Now().Add(200*time.Millisecond))
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.Is(err, ErrStreamCut) {
		t.Fatalf("send over the window: %v, want a timeout that cut the stream", err)
	}
	err = st.SendBy(runDeltaEnv(2, "next"), time.Now().Add(time.Second))
	if !errors.Is(err, ErrStreamCut) {
		t.Fatalf("send after a cut frame: %v, want ErrStreamCut", err)
	}
	if err := st.Queue(runDeltaEnv(3, "queued")); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); !errors.Is(err, ErrStreamCut) {
		t.Fatalf("flush after a cut frame: %v, want ErrStreamCut", err)
	}
}

// A send whose deadline passes before any of its frame went out (the
// window filled exactly at a frame's end) leaves the stream as it was:
// once the peer reads, the next send goes through and the peer reads
// every frame whole.
func TestSendTimedOutBeforeFrameKeepsStream(t *testing.T) {
	client, server := muxPair(t)
	ms, _ := client.OpenStream()
	st := newStream(ms, 0)
	full := deltaFrameOf(t, muxWindow)
	if err := st.Send(full); err != nil {
		t.Fatal(err)
	}
	peer := newStream(acceptWithin(t, server), 0)

	err := st.SendBy(runDeltaEnv(2, "late"), time.Now().Add(100*time.Millisecond))
	if !errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ErrStreamCut) {
		t.Fatalf("send with no credit: %v, want a timeout that cut nothing", err)
	}
	_ = peer.SetReadDeadline(time.Now().Add(waitLong))
	if env, err := peer.Recv(); err != nil || !proto.Equal(env, full) {
		t.Fatalf("first frame: %v", err)
	}
	next := runDeltaEnv(3, "next")
	if err := st.SendBy(next, time.Now().Add(waitLong)); err != nil {
		t.Fatalf("send once the peer read: %v", err)
	}
	if env, err := peer.Recv(); err != nil || !proto.Equal(env, next) {
		t.Fatalf("second frame: %v %v", env, err)
	}
}
