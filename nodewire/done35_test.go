package nodewire

import (
	"errors"
	"strings"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A RecvLent waiting on a quiet stream returns ErrDone once the owner's
// done channel closes: how the edge notices its client gone while a
// stream is held, without a callback registered on the request context.
func TestSetDoneEndsWaitingRecv35(t *testing.T) {
	send, recv := lentPair(t)
	if _, err := recv.RecvLent(); err != nil { // the status frame
		t.Fatal(err)
	}
	_ = send
	done := make(chan struct{})
	recv.SetDone(done)
	// A safety net only: the wait must end by done, long before this.
	_ = recv.SetReadDeadline(time.Now().Add(time.Minute))
	got := make(chan error, 1)
	// Owner: this test; ends when RecvLent returns (done, or the minute's
	// read deadline).
	go func() {
		_, err := recv.RecvLent()
		got <- err
	}()
	waitFor(t, "the reader to wait", func() bool { return !recv.FrameReady() })
	close(done)
	select {
	case err := <-got:
		if !errors.Is(err, ErrDone) {
			t.Fatalf("RecvLent after done: %v, want ErrDone", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RecvLent still waiting 30 s after done closed")
	}
}

// Once done has closed, RecvLent fails before it returns a frame that has
// already arrived (a stream whose frames never stop must not hide the
// owner's end), and after SetDone(nil) the frame is still there.
func TestSetDoneBeforeQueuedFrame35(t *testing.T) {
	send, recv := lentPair(t)
	if _, err := recv.RecvLent(); err != nil { // the status frame
		t.Fatal(err)
	}
	if err := send.Send(tunnelFrameEnv(&iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 2, Body: []byte("data: x\n\n")})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the frame to arrive", recv.FrameReady)
	done := make(chan struct{})
	close(done)
	recv.SetDone(done)
	if _, err := recv.RecvLent(); !errors.Is(err, ErrDone) {
		t.Fatalf("RecvLent with done closed and a frame queued: %v, want ErrDone", err)
	}
	recv.SetDone(nil)
	env, err := recv.RecvLent()
	if err != nil || string(env.GetProviderTunnelFrame().GetBody()) != "data: x\n\n" {
		t.Fatalf("after SetDone(nil): %v, %v; want the queued frame", env, err)
	}
}

// A read that ends by done halfway through a frame keeps what it read,
// as one that ends by its deadline does: the exchange's drain after the
// cancellation reads on to the terminal frame in step.
func TestSetDoneMidFrameKeepsStreamInStep35(t *testing.T) {
	cst, sst, rest := midFrame(t)
	// Read the header and the half (the first RecvLent waits for the rest
	// inside the frame), then end it by done.
	done := make(chan struct{})
	sst.SetDone(done)
	got := make(chan error, 1)
	// Owner: this test; ends when RecvLent returns (done, or the
	// sessions' close at cleanup).
	go func() {
		_, err := sst.RecvLent()
		got <- err
	}()
	waitFor(t, "the half to be taken", func() bool {
		sst.s.mu.Lock()
		defer sst.s.mu.Unlock()
		return len(sst.s.rbuf)-sst.s.roff == 0
	})
	close(done)
	select {
	case err := <-got:
		if !errors.Is(err, ErrDone) {
			t.Fatalf("RecvLent mid-frame after done: %v, want ErrDone", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RecvLent mid-frame still waiting 30 s after done closed")
	}
	sst.SetDone(nil)
	if _, err := cst.Write(rest); err != nil {
		t.Fatal(err)
	}
	_ = sst.SetReadDeadline(time.Now().Add(30 * time.Second))
	var kinds []string
	for {
		env, err := sst.RecvLent()
		if err != nil {
			kinds = append(kinds, "error: "+err.Error())
			break
		}
		kinds = append(kinds, env.GetRunEvent().GetType().String())
		if env.GetRunEvent().GetType() == iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
			break
		}
	}
	want := []string{iop.RunEventType_RUN_EVENT_TYPE_DELTA.String(), iop.RunEventType_RUN_EVENT_TYPE_COMPLETE.String()}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Fatalf("after a mid-frame end by done: %q, want %q", kinds, want)
	}
}

// A send waiting for window credit the peer never grants returns ErrDone
// once done closes: the edge's request send is bounded by its client
// without a callback on the request context.
func TestSetDoneEndsSendWaitingForCredit35(t *testing.T) {
	client, server := muxPair(t)
	cst, _ := client.OpenStream()
	st := newStream(cst, 4<<20)
	_ = server // the peer accepts nothing and reads nothing: no credit comes
	done := make(chan struct{})
	st.SetDone(done)
	_ = st.SetWriteDeadline(time.Now().Add(time.Minute)) // a safety net only
	got := make(chan error, 1)
	// Owner: this test; ends when Send returns (done, or the minute's
	// write deadline).
	go func() {
		got <- st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{
			RunId: "r1", Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: strings.Repeat("d", 2*muxWindow)}}})
	}()
	waitFor(t, "the send to use up its window", func() bool {
		cst.mu.Lock()
		defer cst.mu.Unlock()
		return cst.sendWin == 0
	})
	close(done)
	select {
	case err := <-got:
		if !errors.Is(err, ErrDone) {
			t.Fatalf("Send after done: %v, want ErrDone", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Send still waiting 30 s after done closed")
	}
}
