package nodewire

import (
	"errors"
	"testing"
	"time"
)

// When the edge's session ends on a protocol violation by the node, the
// Conn's close cause (what Handler.Closed gets and dispatch's closeReason
// maps: "protocol violation", "node stopped reading") says so, not "session
// ended: EOF" (which the registry would log as "closed by the node").
func TestProtocolViolationIsTheCloseCause(t *testing.T) {
	for i := 0; i < 10; i++ {
		protocolViolationCause(t, i)
	}
}

func protocolViolationCause(t *testing.T, i int) {
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")
	// A multiplexer frame of an unknown version, written whole by the node.
	bad := rawHeader(muxTypeData, 0, 1, 0)
	bad[0] = 9
	if _, err := cc.raw.Write(bad); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sc.Done():
	case <-time.After(waitLong):
		t.Fatal("edge did not close on a protocol violation")
	}
	if cause := sc.sess.Load().err(); !errors.Is(cause, ErrProtocol) {
		t.Fatalf("session cause %v, want ErrProtocol", cause)
	}
	if err := sc.Err(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("try %d: Conn.Err() = %v; the session's cause was %v (ErrProtocol)", i, err, sc.sess.Load().err())
	}
}
