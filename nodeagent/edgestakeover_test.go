package nodeagent

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// namedDNS answers each name with the addresses last set for it; a name
// with none set is not found.
type namedDNS struct {
	mu      sync.Mutex
	answers map[string][]string // guarded by mu
}

func newNamedDNS(t *testing.T) *namedDNS {
	d := &namedDNS{answers: map[string][]string{}}
	old := lookupHost
	lookupHost = func(ctx context.Context, host string) ([]string, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if ips, ok := d.answers[host]; ok {
			return ips, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	t.Cleanup(func() { lookupHost = old })
	return d
}

func (d *namedDNS) set(host string, ips ...string) {
	d.mu.Lock()
	d.answers[host] = ips
	d.mu.Unlock()
}

// runEntries runs RunEdges for entries under policy; stop cancels it and
// returns what it returned.
func runEntries(t *testing.T, policy SupervisorConfig, entries []string, agent *Agent, log *zap.Logger) (done chan error, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	// Owner: the test; stops at cancel (stop, or Cleanup).
	go func() { done <- RunEdges(ctx, policy, entries, true, agent, log) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return done, stop
}

const shadowedMsg = "edge address already served by another entry of edge.addresses; one session"

// waitLogged waits until msg has been logged for the entry edgeName.
func waitLogged(t *testing.T, logs *observer.ObservedLogs, msg, edgeName string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, e := range logs.FilterMessage(msg).All() {
			if e.ContextMap()["edge_name"] == edgeName {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q not logged for %s", msg, edgeName)
		}
		time.Sleep(time.Millisecond)
	}
}

// A name whose addresses are all served by other entries keeps following
// its name: when it moves to an address of its own, the node reaches the
// edge there.
func TestShadowedEdgeNameFollowsItsOwnMove(t *testing.T) {
	edges, port := edgesOnOnePort(t, "127.0.0.2", "127.0.0.3")
	a, b := edges[0], edges[1]
	dns := newNamedDNS(t)
	dns.set("alias.test", "127.0.0.2")
	core, logs := observer.New(zapcore.WarnLevel)
	alias := net.JoinHostPort("alias.test", port)
	done, stop := runEntries(t, dnsPolicy(0), []string{net.JoinHostPort("127.0.0.2", port), alias}, newTestAgent(t), zap.New(core))
	readyOrStopped(t, a, done)
	waitLogged(t, logs, shadowedMsg, alias)
	dns.set("alias.test", "127.0.0.3")
	readyOrStopped(t, b, done)
	if got := a.registrations(); got != 1 {
		t.Fatalf("%d registrations with a, want 1", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}

// An address one name stops serving (the name moved, and the session
// with the old address ended) is taken over by another name that lists
// it, even while that name has a session of its own elsewhere (it does
// not look its name up then).
func TestEdgeNameTakesOverAnAddressAnotherNameLetGo(t *testing.T) {
	// x is the address both names list, y where first moves, z second's
	// own; nothing listens on r (first's attempts there fail, having
	// first look its name up again while its session with x is up).
	edges, port := edgesOnOnePort(t, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	x, y, z := edges[0], edges[1], edges[2]
	dns := newNamedDNS(t)
	dns.set("first.test", "127.0.0.2", "127.0.0.5")
	core, logs := observer.New(zapcore.WarnLevel)
	second := net.JoinHostPort("second.test", port)
	done, stop := runEntries(t, dnsPolicy(0), []string{net.JoinHostPort("first.test", port), second}, newTestAgent(t), zap.New(core))
	firstX := x.nextReady(t)
	// second resolves only now, so that first holds x.
	dns.set("second.test", "127.0.0.2", "127.0.0.4")
	readyOrStopped(t, z, done)
	waitLogged(t, logs, shadowedMsg, second)
	// first moves to y; its session with x lasts until x ends it.
	dns.set("first.test", "127.0.0.3")
	readyOrStopped(t, y, done)
	_ = firstX.Close()
	secondX := x.nextReady(t)
	if tr := command(t, secondX, CmdTransport); tr["connected"] != true {
		t.Fatalf("x: transport = %v, want a session up", tr)
	}
	if got := z.registrations(); got != 1 {
		t.Fatalf("%d registrations with z, want 1 (its session untouched)", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}

// A name that serves none of its addresses still ends when the node
// drains: RunEdges returns once the sessions that were up have ended.
func TestShadowedEdgeNameEndsOnDrain(t *testing.T) {
	edges, port := edgesOnOnePort(t, "127.0.0.2")
	a := edges[0]
	dns := newNamedDNS(t)
	dns.set("alias.test", "127.0.0.2")
	core, logs := observer.New(zapcore.WarnLevel)
	alias := net.JoinHostPort("alias.test", port)
	agent := newTestAgent(t)
	done, _ := runEntries(t, dnsPolicy(0), []string{net.JoinHostPort("127.0.0.2", port), alias}, agent, zap.New(core))
	ca := a.nextReady(t)
	waitLogged(t, logs, shadowedMsg, alias)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := agent.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	_ = ca.Close() // a drained node's session lasts until the edge ends it
	select {
	case err := <-done:
		done <- err // for stop in Cleanup
		if err != nil {
			t.Fatalf("RunEdges after a drain = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunEdges did not return after a drain")
	}
}
