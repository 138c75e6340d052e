package nodeagent

import (
	"fmt"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The cap on an edge name's supervisors counts a live session whose
// address DNS no longer lists: it keeps its session, so a name answering
// with maxAddressesPerName new addresses gets one fewer started.
func TestEdgeNameCapCountsALiveSessionNoLongerListed(t *testing.T) {
	ips := make([]string, maxAddressesPerName)
	for i := range ips {
		ips[i] = fmt.Sprintf("127.0.1.%d", i+1)
	}
	r := startRefusingListeners(t, ips)
	a := startFakeEdgeOn(t, net.JoinHostPort("127.0.0.2", r.port), mockPayload(1), nil)
	b := startFakeEdgeOn(t, net.JoinHostPort("127.0.0.3", r.port), mockPayload(1), nil)
	dns := newMovableDNS(t, "127.0.0.2", "127.0.0.3")
	core, logs := observer.New(zapcore.InfoLevel)
	done, stop := runNamed(t, dnsPolicy(0), r.port, zap.New(core))
	readyOrStopped(t, a, done)
	cb := b.nextReady(t)
	// The edges have the ready requests; the follower must count both
	// sessions as ready (logged after it does) before DNS moves, or the
	// one with a, no longer listed, is not yet a session it keeps.
	for deadline := time.Now().Add(30 * time.Second); logs.FilterMessage("edge session ready").Len() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the node never logged both sessions ready")
		}
	}
	// DNS moves to maxAddressesPerName new addresses; the session with a
	// stays up, the one with b is lost and has the name looked up.
	dns.set(ips...)
	n := dns.lookups.Load()
	_ = cb.Close()
	deadline := time.Now().Add(30 * time.Second)
	for got, _ := r.reached(); got < maxAddressesPerName-1 || dns.lookups.Load() < n+3; got, _ = r.reached() {
		if time.Now().After(deadline) {
			t.Fatalf("%d new addresses dialled after %d lookups, want %d", got, dns.lookups.Load()-n, maxAddressesPerName-1)
		}
		time.Sleep(time.Millisecond)
	}
	if got, reached := r.reached(); got != maxAddressesPerName-1 {
		t.Fatalf("%d new addresses dialled (%v) beside the live session, want %d", got, reached, maxAddressesPerName-1)
	}
	if err := stop(); err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}
