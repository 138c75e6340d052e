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
	client := fullQueueClient(t)
	st, _ := client.OpenStream()
	done := make(chan struct{})
	st.setDone(done)
	// A safety net only: the wait must end by done, long before this.
	_ = st.SetWriteDeadline(time.Now().Add(time.Minute))
	res := writeWaitingForRoom(t, client, st)
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
