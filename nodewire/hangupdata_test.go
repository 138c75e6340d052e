package nodewire

import (
	"errors"
	"io"
	"testing"
)

// Bytes a peer sent before it hung up stay readable once the session has
// failed (a node may send its last frame and drop the connection); the
// failure comes after them.
func TestDataBeforeHangUpStaysReadable(t *testing.T) {
	c, s := tcpPair(t)
	server := muxServer(s)
	t.Cleanup(func() { _ = server.Close() })
	msg := "the last answer"
	if _, err := c.Write(append(rawHeader(muxTypeData, flagSYN, 1, uint32(len(msg))), msg...)); err != nil {
		t.Fatal(err)
	}
	st := acceptWithin(t, server)
	_ = c.Close()
	waitFor(t, "the session to see the hang-up", server.IsClosed)

	got, err := io.ReadAll(st)
	if string(got) != msg {
		t.Fatalf("read %q after the hang-up, want %q", got, msg)
	}
	if !errors.Is(err, errSessionClosed) {
		t.Fatalf("read ended with %v, want errSessionClosed", err)
	}
}
