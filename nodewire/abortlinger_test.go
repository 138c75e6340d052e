package nodewire

import (
	"testing"
	"time"
)

// An aborted stream's linger (its reset if the peer never ends its side)
// is stopped as soon as the stream ends otherwise: the peer's FIN or
// reset, or the session's failure. A timer left armed holds its stream
// for the whole linger, and at a high rate of aborted exchanges that is
// as many live timers.
func TestAbortLingerStoppedWhenStreamEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, peer func([]byte), server *muxSession)
	}{
		{"peer FIN", func(t *testing.T, peer func([]byte), server *muxSession) {
			peer(rawHeader(muxTypeData, flagFIN, 1, 0))
			waitFor(t, "the session to forget the finished stream", func() bool { return server.NumStreams() == 0 })
		}},
		{"peer reset", func(t *testing.T, peer func([]byte), server *muxSession) {
			peer(rawHeader(muxTypeData, flagRST, 1, 0))
			waitFor(t, "the session to forget the reset stream", func() bool { return server.NumStreams() == 0 })
		}},
		{"session closed", func(t *testing.T, peer func([]byte), server *muxSession) {
			_ = server.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := tcpPair(t)
			server := muxServer(s)
			t.Cleanup(func() { _ = server.Close() })
			peer := func(b []byte) {
				t.Helper()
				if _, err := c.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			peer(append(rawHeader(muxTypeData, flagSYN, 1, 1), 'q'))
			ms := acceptWithin(t, server)
			newStream(ms, 0).Abort()
			ms.mu.Lock()
			armed := ms.linger != nil
			ms.mu.Unlock()
			if !armed {
				t.Fatal("an aborted stream the peer has not ended has no linger armed")
			}
			tc.end(t, peer, server)
			ms.mu.Lock()
			defer ms.mu.Unlock()
			if ms.linger != nil {
				t.Fatalf("the linger of a stream that ended is still armed (%v of a timer holding the stream)", abortLinger)
			}
		})
	}
}

// An aborted stream the peer had already finished both ways arms no
// linger: nothing is left to reset.
func TestAbortOfFinishedStreamArmsNoLinger(t *testing.T) {
	c, s := tcpPair(t)
	server := muxServer(s)
	t.Cleanup(func() { _ = server.Close() })
	if _, err := c.Write(append(rawHeader(muxTypeData, flagSYN|flagFIN, 1, 1), 'q')); err != nil {
		t.Fatal(err)
	}
	ms := acceptWithin(t, server)
	_ = ms.SetReadDeadline(time.Now().Add(waitLong))
	if _, err := ms.Read(make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	newStream(ms, 0).Abort()
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.linger != nil {
		t.Fatal("an aborted stream finished both ways armed a linger")
	}
}
