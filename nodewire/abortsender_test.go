package nodewire

import (
	"io"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A sender that takes the stream after Abort gave up writing, and sets a
// deadline of its own (SendBy does, under the stream's lock; dispatch's
// Cancel sets one before its Send), fails at once on a stream without
// credit instead of waiting to that deadline, with Abort waiting behind
// it for the stream's lock.
func TestAbortNotHeldBySenderSettingLaterDeadline(t *testing.T) {
	c, s := tcpPair(t)
	client := muxClient(c)
	t.Cleanup(func() { _ = client.Close() })
	// Owner: the test; ends when the client's socket closes. The peer
	// reads everything and grants nothing.
	go func() { _, _ = io.Copy(io.Discard, s) }()

	ms, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Write(make([]byte, muxWindow)); err != nil {
		t.Fatal(err)
	}
	st := newStream(ms, 0)

	// Another sender holds the stream's lock when Abort starts.
	st.wmu.Lock()
	aborted := make(chan struct{})
	go func() { // Owner: the test; ends when Abort returns.
		st.Abort()
		close(aborted)
	}()
	waitFor(t, "Abort to give up writing", func() bool {
		ms.mu.Lock()
		defer ms.mu.Unlock()
		return ms.wdl.expired
	})
	// That sender's own deadline, then its send (SendBy's body).
	sent := make(chan error, 1)
	go func() { // Owner: the test; ends when the send fails.
		_ = st.s.SetWriteDeadline(time.Now().Add(time.Hour))
		sent <- st.sendLocked(&iop.Envelope{Body: &iop.Envelope_Heartbeat{Heartbeat: &iop.Heartbeat{Sequence: 1}}})
		st.wmu.Unlock()
	}()
	select {
	case err := <-sent:
		if err == nil {
			t.Fatal("a send with no window credit after Abort succeeded")
		}
	case <-time.After(waitLong):
		t.Fatalf("a send after Abort still waits for credit after %v, to its own deadline an hour away", waitLong)
	}
	select {
	case <-aborted:
	case <-time.After(waitLong):
		t.Fatalf("Abort still waiting after %v", waitLong)
	}
}
