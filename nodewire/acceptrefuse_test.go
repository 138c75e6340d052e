package nodewire

import (
	"testing"
	"time"
)

// writeOpens writes one open (SYN, no payload) for each id in one write.
func writeOpens(t *testing.T, c interface{ Write([]byte) (int, error) }, ids ...uint32) {
	t.Helper()
	var burst []byte
	for _, id := range ids {
		burst = append(burst, rawHeader(muxTypeData, flagSYN, id, 0)...)
	}
	if _, err := c.Write(burst); err != nil {
		t.Fatal(err)
	}
}

// An open refused because the accept backlog stayed full gives its place
// among the peer's open streams back: it never counts against
// muxMaxPeerStreams, so the next open after room is made is taken, not
// reset as one too many.
func TestRefusedOpenFreesItsPlace(t *testing.T) {
	defer func(d time.Duration, n int) { muxAcceptWait, muxMaxPeerStreams = d, n }(muxAcceptWait, muxMaxPeerStreams)
	muxAcceptWait, muxMaxPeerStreams = 20*time.Millisecond, muxAcceptBacklog+1
	c, s := tcpPair(t)
	server := muxServer(s)
	defer server.Close()

	// A full backlog, then one open more: refused after the wait.
	ids := make([]uint32, 0, muxAcceptBacklog+1)
	for i := range muxAcceptBacklog + 1 {
		ids = append(ids, uint32(2*i+1))
	}
	writeOpens(t, c, ids...)
	refused := ids[len(ids)-1]
	_ = c.SetReadDeadline(time.Now().Add(waitLong))
	if f := readRawFrame(t, c); f.flags&flagRST == 0 || f.id != refused {
		t.Fatalf("got frame %+v, want the reset of stream %d", f, refused)
	}

	// Room for one: the peer has muxAcceptBacklog streams open, one under
	// the bound, so its next open is taken.
	if st := acceptWithin(t, server); st.StreamID() != 1 {
		t.Fatalf("accepted stream %d, want 1", st.StreamID())
	}
	next := refused + 2
	writeOpens(t, c, next)
	var last uint32
	for range muxAcceptBacklog {
		last = acceptWithin(t, server).StreamID()
	}
	if last != next {
		t.Fatalf("last stream accepted %d, want %d", last, next)
	}
}

// Closing a session whose reader waits for room in a full accept backlog
// returns at once: the wait ends with the session, not after
// muxAcceptWait.
func TestCloseEndsWaitForAcceptRoom(t *testing.T) {
	defer func(d time.Duration) { muxAcceptWait = d }(muxAcceptWait)
	muxAcceptWait = time.Minute
	c, s := tcpPair(t)
	server := muxServer(s)

	ids := make([]uint32, 0, muxAcceptBacklog+1)
	for i := range muxAcceptBacklog + 1 {
		ids = append(ids, uint32(2*i+1))
	}
	writeOpens(t, c, ids...)
	// The last open is registered before the reader waits for room.
	waitFor(t, "the reader to wait for room in the backlog", func() bool {
		return server.NumStreams() == muxAcceptBacklog+1
	})
	closed := make(chan struct{})
	// Owner: the test; ends when Close returns.
	go func() {
		_ = server.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(waitLong):
		t.Fatalf("Close still waiting after %s on a reader waiting %s for accept room", waitLong, muxAcceptWait)
	}
}
