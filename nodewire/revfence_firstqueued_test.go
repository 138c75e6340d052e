package nodewire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// unreadLen is how many bytes the stream holds unread.
func unreadLen(st *Stream) int {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	return len(st.s.rbuf) - st.s.roff
}

// FirstQueued never waits for a Recv under way: a fence looks at the queue
// holding the dispatcher's lock, and a holder blocked in Recv (nothing
// queued) must not hold it there until the node sends something.
func TestFirstQueuedDoesNotWaitForRecv(t *testing.T) {
	send, recv := lentPair(t)
	if _, err := recv.Recv(); err != nil { // the STATUS frame lentPair sends
		t.Fatal(err)
	}
	recvd := make(chan error, 1)
	// Owner: this test; ends when the frame sent below arrives.
	go func() { _, err := recv.Recv(); recvd <- err }()
	waitFor(t, "the Recv to wait", func() bool {
		if recv.rmu.TryLock() {
			recv.rmu.Unlock()
			return false
		}
		return true
	})
	done := make(chan bool, 1)
	// Owner: this test; ends at once, or once the Recv returns.
	go func() { _, ok := recv.FirstQueued(tunnelEnded); done <- ok }()
	waited := false
	select {
	case ok := <-done:
		if ok {
			t.Error("FirstQueued found a frame with nothing queued")
		}
	case <-time.After(waitLong):
		t.Error("FirstQueued waited for a Recv under way")
		waited = true
	}
	if err := send.Send(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true})); err != nil {
		t.Fatal(err)
	}
	if err := <-recvd; err != nil {
		t.Fatal(err)
	}
	if waited {
		<-done
	}
}

// After a Recv timed out mid-frame, the unread bytes start inside that
// frame's payload: FirstQueued must not read them as length prefixes (a
// payload that looks like a whole terminal frame is not one).
func TestFirstQueuedMidFrameFindsNothing(t *testing.T) {
	send, recv := lentPair(t)
	if _, err := recv.Recv(); err != nil {
		t.Fatal(err)
	}
	end, err := AppendFrame(nil, tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true}), 0)
	if err != nil {
		t.Fatal(err)
	}
	// A BODY frame whose payload ends with the bytes of a whole END frame.
	body, err := AppendFrame(nil, tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: end}), 0)
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.Index(body, end)
	if cut <= frameHeaderLen || cut+len(end) != len(body) {
		t.Fatalf("the END frame is not the BODY frame's tail (at %d of %d)", cut, len(body))
	}
	if _, err := send.s.Write(body[:cut]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the frame's head at the receiver", func() bool { return unreadLen(recv) == cut })
	// The deadline has passed: Recv reads what is there and keeps it.
	_ = recv.SetReadDeadline(time.Now())
	if _, err := recv.Recv(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Recv of half a frame: %v, want a timeout", err)
	}
	if _, err := send.s.Write(body[cut:]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the frame's tail at the receiver", func() bool { return unreadLen(recv) == len(end) })
	if env, ok := recv.FirstQueued(tunnelEnded); ok {
		t.Fatalf("mid-frame: FirstQueued = %v, want none", env)
	}
	_ = recv.SetReadDeadline(time.Time{})
	env, err := recv.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if f := env.GetProviderTunnelFrame(); f.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY || !bytes.Equal(f.GetBody(), end) {
		t.Fatalf("read %v, want the BODY frame whole", f)
	}
}

// Once a length over the limit failed the stream, what follows it is that
// frame's payload, not frames: FirstQueued finds nothing there.
func TestFirstQueuedAfterOversizeFindsNothing(t *testing.T) {
	send, recv := lentPair(t)
	if _, err := recv.Recv(); err != nil {
		t.Fatal(err)
	}
	end, err := AppendFrame(nil, tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true}), 0)
	if err != nil {
		t.Fatal(err)
	}
	raw := binary.BigEndian.AppendUint32(nil, uint32(recv.maxFrame)+1)
	raw = append(raw, end...)
	if _, err := send.s.Write(raw); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bytes at the receiver", func() bool { return unreadLen(recv) == len(raw) })
	if _, err := recv.Recv(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("Recv of a length over the limit: %v, want ErrFrameTooLarge", err)
	}
	if env, ok := recv.FirstQueued(tunnelEnded); ok {
		t.Fatalf("after a length over the limit: FirstQueued = %v, want none", env)
	}
}
