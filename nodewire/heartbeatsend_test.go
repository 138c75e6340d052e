package nodewire

import (
	"errors"
	"io"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A heartbeat that cannot be queued within the heartbeat timeout (the
// connection's queue full behind a peer that reads nothing, while the
// socket's write has not yet timed out) closes the connection then, on
// the node's clock: the heartbeat's send is bounded, not left to wait for
// the writer's much longer bound.
func TestHeartbeatSendBoundedByTimeout(t *testing.T) {
	old := muxWriteTimeout
	muxWriteTimeout = time.Hour
	t.Cleanup(func() { muxWriteTimeout = old })
	e := startRawEdge(t)
	cc, c := rawEdgeReady(t, e, DialConfig{}, &iop.HeartbeatConfig{IntervalMs: 20, TimeoutMs: 300})
	// The edge's heartbeats keep coming: the node's receiver is content.
	stop := stopReadingWithHeartbeats(t, cc, c)
	defer stop()
	waitDone(t, cc.Conn, waitLong, "node whose heartbeat could not be queued")
	if err := cc.Err(); errors.Is(err, ErrHeartbeatTimeout) || !errors.Is(err, errTimeout) {
		t.Fatalf("close cause %v, want the heartbeat send's timeout", err)
	}
	_ = cc.Close()
	_, _ = io.Copy(io.Discard, c)
}
