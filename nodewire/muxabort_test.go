package nodewire

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Abort hands back the credit of the unread bytes it drops: a peer whose
// writes had filled the window when the owner gave up sends on into the
// discard and ends with its FIN, instead of waiting for the reset after
// abortLinger.
func TestAbortReturnsCreditOfDroppedBytes(t *testing.T) {
	client, server := muxPair(t)
	cst, _ := client.OpenStream()
	// The peer (node) answers with a full window the owner has not read yet.
	if _, err := cst.Write(make([]byte, muxWindow)); err != nil {
		t.Fatal(err)
	}
	sst := acceptWithin(t, server)
	waitFor(t, "the whole window to arrive", func() bool {
		sst.mu.Lock()
		defer sst.mu.Unlock()
		return len(sst.rbuf)-sst.roff == muxWindow
	})
	// The edge gives up on the exchange.
	newStream(sst, 0).Abort()

	// The node's next write must not block: the aborted stream discards
	// and credits back whatever arrives.
	_ = cst.SetWriteDeadline(time.Now().Add(time.Second))
	start := time.Now()
	n, err := cst.Write(make([]byte, 1024))
	if err != nil {
		t.Fatalf("peer write after Abort: wrote %d, err %v after %v (the credit of the %d unread bytes Abort dropped never came back)",
			n, err, time.Since(start).Round(time.Millisecond), muxWindow)
	}
}

// A peer that keeps sending on an aborted stream and never reads the window
// updates that credit it back is dropped (the control queue's bound), and
// the session still closes: the update is queued with the stream's lock
// released, since the bound's closeWith fails every stream, this one too.
func TestDiscardCreditToSilentPeerClosesSession(t *testing.T) {
	oldPending, oldTimeout := muxMaxControlPending, muxWriteTimeout
	muxMaxControlPending, muxWriteTimeout = 64<<10, 3*time.Second
	t.Cleanup(func() { muxMaxControlPending, muxWriteTimeout = oldPending, oldTimeout })

	c, s := tcpPair(t)
	_ = s.(*net.TCPConn).SetWriteBuffer(4096)
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	edge := newMuxSession(s, false, 1)

	// The peer opens one stream (as a node opens its control stream, or
	// answers on an edge-opened one).
	if _, err := c.Write(append(rawHeader(muxTypeData, flagSYN, 1, 1), 'x')); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	st, err := edge.AcceptStreamWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The owner gives up on it (what Stream.Abort does after every
	// finished exchange on the edge); a long linger keeps it in discard.
	st.abort(time.Hour)

	// The peer keeps sending 1-byte frames on it and never reads: every
	// frame is credited back with a window update that piles up.
	done := make(chan struct{})
	go func() { // Owner: the test; ends when the connection is closed.
		defer close(done)
		var batch []byte
		for range 4096 {
			batch = append(append(batch, rawHeader(muxTypeData, 0, 1, 1)...), 'y')
		}
		for {
			_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Write(batch); err != nil {
				return
			}
		}
	}()

	select {
	case <-edge.CloseChan():
	case <-time.After(20 * time.Second):
		t.Fatal("the session was never closed")
	}
	t.Logf("session closed: %v", edge.err())

	closed := make(chan struct{})
	go func() { _ = edge.Close(); close(closed) }() // Owner: the test.
	select {
	case <-closed:
	case <-time.After(waitLong):
		t.Errorf("muxSession.Close did not return within %v: the reader is stuck in deliver", waitLong)
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "(*muxStream).deliver") {
				t.Logf("stuck reader:\n%s", g)
			}
		}
	}
	_ = c.Close()
	await(t, done, "the raw peer's reader to end after Close")
}
