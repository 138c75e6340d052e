package nodewire

import (
	"net"
	"testing"
	"time"
)

// A write waiting for room in the session's queue (muxMaxPending bytes
// already wait for a peer that does not read) ends when its write deadline
// is moved to now, as dispatch does when the client goes and Stream.Abort
// does before it closes: the wait follows the deadline, not the peer.
func TestWriteDeadlineEndsWaitForFullQueue(t *testing.T) {
	c, s := tcpPair(t)
	_ = c.(*net.TCPConn).SetWriteBuffer(4096)
	_ = s.(*net.TCPConn).SetReadBuffer(4096)
	client := muxClient(c) // the peer (s) never reads
	t.Cleanup(func() { _ = client.Close() })

	// Fill the session's queue past muxMaxPending with streams' full
	// windows while the writer is stuck on the socket. How much the
	// writer hands the kernel before it sticks varies with the machine,
	// so streams are added until the queue is full.
	pending := 0
	for range 64 {
		st, _ := client.OpenStream()
		_ = st.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
		_, _ = st.Write(make([]byte, muxWindow))
		client.wmu.Lock()
		pending = len(client.pending)
		client.wmu.Unlock()
		if pending >= muxMaxPending {
			break
		}
	}
	if pending < muxMaxPending {
		t.Fatalf("queue holds %d bytes, want at least muxMaxPending (%d)", pending, muxMaxPending)
	}

	st, _ := client.OpenStream()
	res := make(chan error, 1)
	go func() { // Owner: the test; ends when the write returns.
		_, err := st.Write([]byte("request"))
		res <- err
	}()
	// Wait until the write waits for room (lockPending made drained).
	for waiting := false; !waiting; {
		client.wmu.Lock()
		waiting = client.drained != nil
		client.wmu.Unlock()
		select {
		case err := <-res:
			t.Fatalf("write returned before the deadline moved: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	_ = st.SetWriteDeadline(time.Now())
	select {
	case err := <-res:
		t.Logf("write returned: %v", err)
	case <-time.After(time.Second):
		t.Errorf("a write waiting for room in the queue ignored SetWriteDeadline(now) for 1s")
		_ = client.Close()
		<-res
	}
}
