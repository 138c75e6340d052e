package nodewire

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// stuckConn is a connection whose first Write never returns until Close:
// a peer that stopped reading with every buffer between the two full.
// entered is closed once the writer is inside that Write.
type stuckConn struct {
	net.Conn
	entered   chan struct{}
	closed    chan struct{}
	enterOnce sync.Once
	closeOnce sync.Once
}

func newStuckConn(t *testing.T) *stuckConn {
	c, s := net.Pipe()
	t.Cleanup(func() { _ = s.Close() })
	return &stuckConn{Conn: c, entered: make(chan struct{}), closed: make(chan struct{})}
}

func (c *stuckConn) Write([]byte) (int, error) {
	c.enterOnce.Do(func() { close(c.entered) })
	<-c.closed
	return 0, net.ErrClosed
}

func (c *stuckConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// fullQueueClient is a client session whose writer sticks on a first
// stream's frames (conn never takes them) and whose queue holds
// muxMaxPending bytes of further streams' frames (one each, so that none
// waits).
func fullQueueClient(t *testing.T) *muxSession {
	t.Helper()
	conn := newStuckConn(t)
	client := muxClient(conn)
	t.Cleanup(func() { _ = client.Close() })
	first, _ := client.OpenStream()
	if _, err := first.Write(make([]byte, muxWindow)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-conn.entered:
	case <-time.After(waitLong):
		t.Fatal("the writer never wrote")
	}
	for pending := 0; pending < muxMaxPending; {
		st, _ := client.OpenStream()
		_ = st.SetWriteDeadline(time.Now().Add(waitLong))
		if _, err := st.Write(make([]byte, muxMaxData)); err != nil {
			t.Fatal(err)
		}
		client.wmu.Lock()
		pending = len(client.pending)
		client.wmu.Unlock()
	}
	return client
}

// writeWaitingForRoom starts a small write on st and returns once it waits
// for room in client's full queue (lockPending made drained); its result
// arrives on the channel.
func writeWaitingForRoom(t *testing.T, client *muxSession, st *muxStream) <-chan error {
	t.Helper()
	res := make(chan error, 1)
	go func() { // Owner: the test; ends when the write returns.
		_, err := st.Write([]byte("request"))
		res <- err
	}()
	for waiting := false; !waiting; {
		client.wmu.Lock()
		waiting = client.drained != nil
		client.wmu.Unlock()
		select {
		case err := <-res:
			t.Fatalf("write returned while it should wait for room: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	return res
}

// A write waiting for room in the session's queue (muxMaxPending bytes
// already wait for a peer that does not read) ends when its write deadline
// is moved to now, as dispatch does when the client goes and Stream.Abort
// does before it closes: the wait follows the deadline, not the peer.
func TestWriteDeadlineEndsWaitForFullQueue(t *testing.T) {
	client := fullQueueClient(t)
	st, _ := client.OpenStream()
	res := writeWaitingForRoom(t, client, st)
	_ = st.SetWriteDeadline(time.Now())
	select {
	case err := <-res:
		if !errors.Is(err, errTimeout) {
			t.Fatalf("write returned %v, want a timeout", err)
		}
	case <-time.After(waitLong):
		t.Fatalf("a write waiting for room in the queue ignored SetWriteDeadline(now) for %s", waitLong)
	}
}
