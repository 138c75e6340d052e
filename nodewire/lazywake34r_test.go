package nodewire

import (
	"errors"
	"testing"
	"time"
)

// A writer waiting for window credit is woken by the peer's reset of the
// stream (deliver's RST), not left waiting for credit that never comes:
// the RST reads the write-notify channel the writer made when it began to
// wait, and signals it.
func TestWaitingWriterWokenByPeerReset(t *testing.T) {
	client, server := muxPair(t)
	a, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write(make([]byte, muxWindow)); err != nil { // the whole window
		t.Fatal(err)
	}
	b := acceptWithin(t, server)
	errc := make(chan error, 1)
	// Owner: this test; ends when the write does (the peer's reset below,
	// or a's reset at cleanup).
	go func() { _, err := a.Write([]byte("more")); errc <- err }()
	t.Cleanup(a.Reset)
	waitFor(t, "writer waiting on its write-notify channel", func() bool { return hasWNotify(a) })
	b.Reset()
	select {
	case err := <-errc:
		if !errors.Is(err, errStreamReset) {
			t.Fatalf("write on a stream the peer reset: %v, want %v", err, errStreamReset)
		}
	case <-time.After(waitLong):
		t.Fatal("writer not woken by the peer's reset")
	}
}
