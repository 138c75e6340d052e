package nodewire

import (
	"errors"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A repeated ready the edge refuses (it no longer counts the connection:
// a newer one of the node took over) closes the node's connection: the
// edge writes its answer, and the node takes ready=false as the end.
func TestRepeatedReadyRefusedClosesNode(t *testing.T) {
	h := newFakeHandler()
	calls := 0
	h.ready = func(c *Conn, req *iop.NodeReadyRequest) *iop.NodeReadyResponse {
		calls++ // Ready calls for one connection are made in order
		return &iop.NodeReadyResponse{Ready: calls == 1, Reason: "stale"}
	}
	ts := startServer(t, h, ServerConfig{})
	cc, _ := readyPair(t, ts, "n1")
	if err := cc.ReadyAgain("n1"); err != nil {
		t.Fatal(err)
	}
	waitDone(t, cc.Conn, waitLong, "node refused on its repeated ready")
	if err := cc.Err(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("close cause %v, want the refusal (ErrProtocol)", err)
	}
}
