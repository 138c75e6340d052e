package nodeagent

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A session of the name reaching ready resets the name's budget: a
// failure before it and the failures after it are not added up.
func TestEdgeNameBudgetResetsWhenASessionIsReady(t *testing.T) {
	// Refused, accepted, then refused for good.
	edges, port := scriptedEdgesOnOnePort(t, func(n int) iop.RejectCode {
		if n == 1 {
			return iop.RejectCode_REJECT_CODE_UNSPECIFIED
		}
		return iop.RejectCode_REJECT_CODE_UNAVAILABLE
	}, "127.0.0.2")
	a := edges[0]
	newMovableDNS(t, "127.0.0.2")
	done, _ := runNamed(t, dnsPolicy(2), port, zap.NewNop())
	ca := a.nextReady(t)
	// A command answered: the node has noted the session ready.
	if tr := command(t, ca, CmdTransport); tr["connected"] != true {
		t.Fatalf("transport = %v, want the session up", tr)
	}
	_ = ca.Close()
	select {
	case err := <-done:
		done <- err // for runNamed's stop
		if !errors.Is(err, ErrAttemptsExhausted) {
			t.Fatalf("err = %v, want exhaustion", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunEdges did not give up")
	}
	// One refusal, the session, then two refusals: the budget of 2 anew.
	if got := a.registrations(); got != 4 {
		t.Fatalf("%d registrations, want 4 (the budget reset at ready)", got)
	}
}

// A session lost while another address of the name is ready still has
// the name looked up: the edge that went away is followed to its new
// address, not only once the whole name is down.
func TestLostSessionLooksTheNameUpWhileAnotherIsReady(t *testing.T) {
	edges, port := edgesOnOnePort(t, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	a, b, c := edges[0], edges[1], edges[2]
	dns := newMovableDNS(t, "127.0.0.2", "127.0.0.3")
	done, stop := runNamed(t, dnsPolicy(0), port, zap.NewNop())
	ca := a.nextReady(t)
	cb := b.nextReady(t)
	// Both sessions noted ready.
	command(t, ca, CmdTransport)
	command(t, cb, CmdTransport)
	dns.set("127.0.0.3", "127.0.0.4")
	_ = ca.Close()
	readyOrStopped(t, c, done)
	if tr := command(t, cb, CmdTransport); tr["connected"] != true {
		t.Fatalf("b: transport = %v, want its session up", tr)
	}
	if err := stop(); err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}

// An address whose supervisor stopped on a fatal rejection is followed
// again once it has left DNS and come back (an edge recreated there).
func TestFatallyRejectedAddressIsFollowedAgainAfterLeavingDNS(t *testing.T) {
	// a rejects the node's protocol version once (an old edge), then
	// accepts (the new one at the same address).
	ea, port := scriptedEdgesOnOnePort(t, func(n int) iop.RejectCode {
		if n == 0 {
			return iop.RejectCode_REJECT_CODE_PROTOCOL_VERSION
		}
		return iop.RejectCode_REJECT_CODE_UNSPECIFIED
	}, "127.0.0.2")
	a := ea[0]
	b := startFakeEdgeOn(t, net.JoinHostPort("127.0.0.3", port), mockPayload(1), nil)
	dns := newMovableDNS(t, "127.0.0.2", "127.0.0.3")
	done, stop := runNamed(t, dnsPolicy(0), port, zap.NewNop())
	cb := b.nextReady(t)
	deadline := time.Now().Add(30 * time.Second)
	for a.registrations() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a never dialled")
		}
		time.Sleep(time.Millisecond)
	}
	// a leaves DNS; b's session is lost, so the name is looked up.
	dns.set("127.0.0.3")
	n := dns.lookups.Load()
	_ = cb.Close()
	cb = b.nextReady(t)
	for dns.lookups.Load() == n {
		if time.Now().After(deadline) {
			t.Fatal("no lookup after b's session was lost")
		}
		time.Sleep(time.Millisecond)
	}
	// a is back: once b's session is lost again, a is followed anew.
	dns.set("127.0.0.2", "127.0.0.3")
	_ = cb.Close()
	readyOrStopped(t, a, done)
	if err := stop(); err != nil && !errors.Is(err, ErrFatal) {
		t.Fatalf("RunEdges after shutdown = %v", err)
	}
}

// Lookups of a name are at least a reconnect interval apart, however
// many of its addresses fail (each failure asks for one).
func TestEdgeNameLookupsAreAnIntervalApart(t *testing.T) {
	ips := make([]string, 8)
	for i := range ips {
		ips[i] = fmt.Sprintf("127.0.4.%d", i+1)
	}
	r := startRefusingListeners(t, ips)
	lookups := stubDNS(t, func(int) ([]string, error) { return ips, nil })
	policy := dnsPolicy(0)
	policy.Interval = 50 * time.Millisecond
	start := time.Now()
	_, stop := runNamed(t, policy, r.port, zap.NewNop())
	total := func() int {
		n := 0
		for i := range r.hits {
			n += int(r.hits[i].Load())
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for total() < 80 {
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts", total())
		}
		time.Sleep(time.Millisecond)
	}
	_ = stop()
	elapsed := time.Since(start)
	if max := int32(elapsed/policy.Interval) + 2; lookups.Load() > max {
		t.Fatalf("%d lookups in %v, want at most %d (one per interval)", lookups.Load(), elapsed, max)
	}
}
