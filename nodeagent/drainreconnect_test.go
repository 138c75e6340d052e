package nodeagent

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/nodewire"
)

// runEdgesAsync runs RunEdges over addresses for agent; the returned
// channel gets what it returned. Cleanup cancels it and waits.
func runEdgesAsync(t *testing.T, policy SupervisorConfig, addresses []string, resolve bool, agent *Agent) chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	stopped := make(chan struct{})
	// Owner: the test; stops when RunEdges returns (by itself, or at
	// cancel in Cleanup).
	go func() {
		defer close(stopped)
		done <- RunEdges(ctx, policy, addresses, resolve, agent, zap.NewNop())
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	return done
}

// stoppedNotReconnected waits for RunEdges to return nil on its own (no
// cancellation), failing if fe gets a new ready session first.
func stoppedNotReconnected(t *testing.T, fe *fakeEdge, done chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunEdges during the drain = %v, want nil", err)
		}
	case <-fe.conns:
		t.Fatalf("the node reconnected to %s during its drain", fe.addr)
	case <-time.After(30 * time.Second):
		t.Fatal("RunEdges did not return once the drain left it no session")
	}
}

// A draining node does not re-establish a session it loses (nor dial any
// other), while its ready sessions stay up: the node is stopping, and a
// new session would only be one more the edge has to see go. Once its
// last session is gone RunEdges returns, without a cancellation.
func TestDrainingNodeDoesNotReconnect(t *testing.T) {
	a := startFakeEdge(t, mockPayload(1), nil)
	b := startFakeEdge(t, mockPayload(1), nil)
	agent := newTestAgent(t)
	policy := dnsPolicy(0)
	done := runEdgesAsync(t, policy, []string{a.addr, b.addr}, false, agent)
	ca, cb := a.nextReady(t), b.nextReady(t)
	if err := agent.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The session a loses is not re-established...
	_ = ca.Close()
	// ...while b's stays up, and answers.
	if tr := command(t, cb, CmdTransport); tr["connected"] != true {
		t.Fatalf("b: transport = %v during the drain, want its session up", tr)
	}
	select {
	case <-a.conns:
		t.Fatal("the node reconnected to a during its drain")
	case err := <-done:
		t.Fatalf("RunEdges returned %v with b's session up", err)
	case <-time.After(20 * policy.Interval):
	}
	_ = cb.Close()
	stoppedNotReconnected(t, b, done)
	if got := a.registrations() + b.registrations(); got != 2 {
		t.Fatalf("%d registrations, want 2 (none during the drain)", got)
	}
}

// A supervisor waiting to reconnect when the drain begins stops then, not
// after its reconnect interval (nor with one more attempt).
func TestDrainEndsTheWaitForAReconnect(t *testing.T) {
	agent := newTestAgent(t)
	log := newAttemptLog()
	sup := NewSupervisor(SupervisorConfig{
		Dial:   nodewire.DialConfig{Address: closedAddr(t), HandshakeTimeout: 2 * time.Second},
		NodeID: "n1", Token: "tok", Interval: time.Hour,
	}, agent, nil)
	sup.onState = log.note
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	// Owner: the test; Run returns at the drain (or cancel).
	go func() { done <- sup.Run(ctx) }()
	waitState(t, log, "failed")
	if err := agent.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run during the drain = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still waiting to reconnect during the drain")
	}
	if got := log.count("dialing"); got != 1 {
		t.Fatalf("%d attempts, want 1 (none during the drain)", got)
	}
}

// A followed name neither looks itself up nor starts a supervisor for a
// new address during the drain: the session it loses is not replaced.
func TestDrainingNodeDoesNotFollowItsEdgeName(t *testing.T) {
	edges, port := edgesOnOnePort(t, "127.0.0.2", "127.0.0.3")
	a, b := edges[0], edges[1]
	dns := newMovableDNS(t, "127.0.0.2")
	agent := newTestAgent(t)
	done := runEdgesAsync(t, dnsPolicy(0), []string{net.JoinHostPort("edge.test", port)}, true, agent)
	ca := a.nextReady(t)
	if err := agent.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := dns.lookups.Load()
	dns.set("127.0.0.3")
	_ = ca.Close()
	stoppedNotReconnected(t, a, done)
	if got := b.registrations(); got != 0 {
		t.Fatalf("%d registrations with the new address during the drain, want 0", got)
	}
	if got := dns.lookups.Load() - n; got != 0 {
		t.Fatalf("%d lookups during the drain, want 0", got)
	}
}

// A name that does not resolve yet when the drain begins is not looked up
// again: RunEdges returns.
func TestDrainStopsLookingUpAnEdgeName(t *testing.T) {
	stubDNS(t, func(int) ([]string, error) {
		return nil, &net.DNSError{Err: "no such host", Name: "edge.test", IsNotFound: true}
	})
	agent := newTestAgent(t)
	policy := dnsPolicy(0)
	policy.Interval = time.Hour
	done := runEdgesAsync(t, policy, []string{"edge.test:1"}, true, agent)
	if err := agent.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunEdges during the drain = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunEdges still looking the name up during the drain")
	}
}

// A drain that begins while the name's first lookup is under way starts
// no supervisor for its answer, and RunEdges returns.
func TestDrainDuringTheFirstLookupStartsNothing(t *testing.T) {
	agent := newTestAgent(t)
	stubDNS(t, func(int) ([]string, error) {
		if err := agent.Drain(context.Background()); err != nil {
			t.Error(err)
		}
		return []string{"127.0.0.2"}, nil
	})
	done := runEdgesAsync(t, dnsPolicy(0), []string{"edge.test:1"}, true, agent)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunEdges during the drain = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunEdges did not return: the drain left the name nothing to wait for")
	}
}
