package nodewire

import (
	"errors"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Abort returns at once even while a Send on the stream waits for window
// credit the peer never grants (and has no write deadline of its own):
// the Send fails, as a frame cut short, instead of holding Abort.
func TestAbortEndsSendWaitingForCredit(t *testing.T) {
	c, s := tcpPair(t)
	client := muxClient(c)
	t.Cleanup(func() { _ = client.Close() })
	_ = s // the peer grants nothing: the frame stops at the window

	ms, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	st := newStream(ms, 0)
	env := &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: &iop.ProviderTunnelFrame{
		Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Body: make([]byte, muxWindow+1),
	}}}
	sent := make(chan error, 1)
	go func() { // Owner: the test; ends when the send fails.
		sent <- st.Send(env)
	}()
	waitFor(t, "the send to spend the window", func() bool {
		ms.mu.Lock()
		defer ms.mu.Unlock()
		return ms.sendWin == 0
	})

	aborted := make(chan struct{})
	go func() { // Owner: the test; ends when Abort returns.
		st.Abort()
		close(aborted)
	}()
	select {
	case <-aborted:
	case <-time.After(waitLong):
		t.Fatalf("Abort still waiting after %s behind a send the peer holds", waitLong)
	}
	select {
	case err := <-sent:
		if !errors.Is(err, ErrStreamCut) {
			t.Fatalf("send: %v, want ErrStreamCut", err)
		}
	case <-time.After(waitLong):
		t.Fatal("send still waiting after Abort")
	}
}

// An aborted stream whose peer never ends its side is reset after the
// linger: the peer learns it (RST), and the session forgets the stream
// instead of holding it for the connection's life.
func TestAbortResetsStreamThePeerNeverEnds(t *testing.T) {
	c, s := tcpPair(t)
	server := muxServer(s)
	t.Cleanup(func() { _ = server.Close() })
	if _, err := c.Write(append(rawHeader(muxTypeData, flagSYN, 1, 1), 'q')); err != nil {
		t.Fatal(err)
	}
	ms := acceptWithin(t, server)
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	ms.abort(10 * time.Millisecond)
	_ = c.SetReadDeadline(time.Now().Add(waitLong))
	for {
		f := readRawFrame(t, c)
		if f.id == 1 && f.flags&flagRST != 0 {
			break
		}
	}
	waitFor(t, "the session to forget the aborted stream", func() bool { return server.NumStreams() == 0 })
}
