package nodewire

import (
	"errors"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// firstFrameMaxWait bounds in all how long the first frame of a stream the
// Edge opened may take to arrive. That frame is a run's or a tunnel's
// whole request, up to the frame limit (15 MiB), paced by the stream's
// 256 KiB window: one window per round trip, so over a long or thin link
// it takes far longer than the handshake timeout. Two minutes is the
// Edge's default body read timeout, and carries a full frame at 128 KiB/s.
// A variable so that tests can shorten it.
var firstFrameMaxWait = 2 * time.Minute

// recvFirst reads the first envelope of a stream the Edge opened. A handler
// goroutine waits on it, so the wait is bounded by the node's clock alone:
// nothing of the frame within idle fails it, as does any idle without a
// byte more of it, and it never outlasts firstFrameMaxWait. Bounding the
// whole frame by idle instead would refuse every request too large to
// cross the link within it, on every node, whatever the Edge's patience.
func recvFirst(st *Stream, idle time.Duration) (*iop.Envelope, error) {
	limit := time.Now().Add(firstFrameMaxWait)
	read := 0 // bytes of the frame read when the last deadline was set
	for {
		deadline := time.Now().Add(idle)
		if deadline.After(limit) {
			deadline = limit
		}
		_ = st.SetReadDeadline(deadline)
		env, err := st.Recv()
		if err == nil || !errors.Is(err, errTimeout) {
			return env, err
		}
		n := st.partialLen()
		if n <= read || !time.Now().Before(limit) {
			return nil, err
		}
		read = n
	}
}

// partialLen is how many bytes of the frame begun Recv has read: zero
// between frames.
func (st *Stream) partialLen() int {
	st.rmu.Lock()
	defer st.rmu.Unlock()
	return st.part.hdrN + len(st.part.payload)
}
