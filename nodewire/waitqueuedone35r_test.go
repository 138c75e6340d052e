package nodewire

import (
	"errors"
	"testing"
	"time"
)

// A write waiting for room in the session's queue (muxMaxPending bytes
// already wait for a peer that does not read) ends with ErrDone once the
// stream's done channel closes, its write deadline far off: the edge's
// request send is bounded by its client there too, not only while it
// waits for window credit (waitQueue's done case).
func TestDoneEndsWaitForFullQueue35r(t *testing.T) {
	conn := newStuckConn(t)
	client := muxClient(conn)
	t.Cleanup(func() { _ = client.Close() })

	// As in TestWriteDeadlineEndsWaitForFullQueue: the writer sticks on a
	// first stream's frames, further streams fill the queue.
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

	st, _ := client.OpenStream()
	done := make(chan struct{})
	st.setDone(done)
	// A safety net only: the wait must end by done, long before this.
	_ = st.SetWriteDeadline(time.Now().Add(time.Minute))
	res := make(chan error, 1)
	go func() { // Owner: the test; ends when the write returns (done, or the minute's deadline).
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
			t.Fatalf("write returned before done closed: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	close(done)
	select {
	case err := <-res:
		if !errors.Is(err, ErrDone) {
			t.Fatalf("write returned %v, want ErrDone", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write waiting for room in the queue ignored its closed done channel for 30 s")
	}
}
