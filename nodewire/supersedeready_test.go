package nodewire

import (
	"context"
	"sync"
	"testing"
	"time"
)

// A registration of a node id whose older connection has had its ready
// answered leaves that connection alone, even while the older one is
// still being activated: superseding a ready node is the handler's
// decision (the registry's), not the listener's; only a connection still
// waiting for its ready is closed by a newer one.
func TestNewerRegistrationLeavesReadyConnection(t *testing.T) {
	h := newFakeHandler()
	release := make(chan struct{})
	var once sync.Once
	h.activate = func(c *Conn) {
		// The first activation waits for the newer registration.
		once.Do(func() {
			select {
			case <-release:
			case <-time.After(waitLong):
			}
		})
	}
	ts := startServer(t, h, ServerConfig{ReadyTimeout: time.Minute})
	cc, sc := readyPair(t, ts, "n1")
	second, _ := dial(t, DialConfig{Address: ts.addr}, "n1")
	recvConn(t, h.registered, "the second registration")
	waitFor(t, "the newer registration to wait for its ready", func() bool {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		a := ts.srv.awaiting["n1"]
		return a != nil && a != sc
	})
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := second.Ready(ctx, "n1"); err != nil {
		t.Fatalf("the newer connection's ready: %v", err)
	}
	if sc.IsClosed() || cc.IsClosed() {
		t.Fatalf("the ready connection was closed by a newer registration: edge %v, node %v", sc.Err(), cc.Err())
	}
}
