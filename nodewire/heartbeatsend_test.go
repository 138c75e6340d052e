package nodewire

import (
	"context"
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
	writeMuxEnvelope(t, c, flagSYN, 2, runRequest("r1"))
	if _, err := c.Write(rawHeader(muxTypeWindow, 0, 2, 1<<30)); err != nil {
		t.Fatal(err)
	}
	stopBeats := make(chan struct{})
	beatsDone := make(chan struct{})
	// Owner: this test; stops at stopBeats or when the node hangs up. The
	// edge's heartbeats keep coming: the node's receiver is content.
	go func() {
		defer close(beatsDone)
		hb := &iop.Envelope{Body: &iop.Envelope_Heartbeat{Heartbeat: &iop.Heartbeat{Sequence: 1}}}
		frame, _ := AppendFrame(nil, hb, 0)
		msg := append(rawHeader(muxTypeData, 0, 1, uint32(len(frame))), frame...)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopBeats:
				return
			case <-tick.C:
			}
			_ = c.SetWriteDeadline(time.Now().Add(waitLong))
			if _, err := c.Write(msg); err != nil {
				return
			}
		}
	}()
	defer func() { close(stopBeats); <-beatsDone }()
	body := tunnelBodyEnvelope(MaxBodyChunk)
	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		for st.Send(body) == nil {
		}
		st.Abort()
	})
	waitDone(t, cc.Conn, waitLong, "node whose heartbeat could not be queued")
	if err := cc.Err(); errors.Is(err, ErrHeartbeatTimeout) || !errors.Is(err, errTimeout) {
		t.Fatalf("close cause %v, want the heartbeat send's timeout", err)
	}
	_ = cc.Close()
	_, _ = io.Copy(io.Discard, c)
}
