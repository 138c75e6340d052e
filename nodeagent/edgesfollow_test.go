package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// movableDNS answers every lookup with the addresses last set.
type movableDNS struct {
	answer  atomic.Pointer[[]string]
	lookups *atomic.Int32
}

func newMovableDNS(t *testing.T, ips ...string) *movableDNS {
	d := &movableDNS{}
	d.set(ips...)
	d.lookups = stubDNS(t, func(int) ([]string, error) { return *d.answer.Load(), nil })
	return d
}

func (d *movableDNS) set(ips ...string) { d.answer.Store(&ips) }

// edgesOnOnePort starts a fake edge on each of ips, all on one port (the
// port of the name the node dials), and returns them with that port.
func edgesOnOnePort(t *testing.T, ips ...string) ([]*fakeEdge, string) {
	return scriptedEdgesOnOnePort(t, nil, ips...)
}

// scriptedEdgesOnOnePort is edgesOnOnePort with script answering each
// edge's registrations (nil: accept).
func scriptedEdgesOnOnePort(t *testing.T, script func(n int) iop.RejectCode, ips ...string) ([]*fakeEdge, string) {
	t.Helper()
	port := "0"
	var edges []*fakeEdge
	for _, ip := range ips {
		fe := startFakeEdgeOn(t, net.JoinHostPort(ip, port), mockPayload(1), script)
		_, port, _ = net.SplitHostPort(fe.addr)
		edges = append(edges, fe)
	}
	return edges, port
}

// runNamed runs RunEdges for edge.test:port under policy; stop cancels it
// and returns what it returned.
func runNamed(t *testing.T, policy SupervisorConfig, port string, log *zap.Logger) (done chan error, stop func() error) {
	t.Helper()
	return runEntries(t, policy, []string{net.JoinHostPort("edge.test", port)}, newTestAgent(t), log)
}

// readyOrStopped waits for fe's next ready session, failing if RunEdges
// returns first.
func readyOrStopped(t *testing.T, fe *fakeEdge, done chan error) {
	t.Helper()
	select {
	case <-fe.conns:
	case err := <-done:
		done <- err
		t.Fatalf("RunEdges returned %v before %s got a session", err, fe.addr)
	case <-time.After(30 * time.Second):
		t.Fatalf("no session with %s", fe.addr)
	}
}

// An edge recreated under a new address (docker compose, Kubernetes) is
// reached there: the node looks its name up again once the session with
// the old address is lost, whether its budget is unlimited or finite.
func TestEdgeNameFollowsTheEdgeToANewAddress(t *testing.T) {
	for _, max := range []int{0, 4} {
		t.Run(fmt.Sprintf("max_attempts=%d", max), func(t *testing.T) {
			edges, port := edgesOnOnePort(t, "127.0.0.2", "127.0.0.3")
			a, b := edges[0], edges[1]
			dns := newMovableDNS(t, "127.0.0.2")
			done, stop := runNamed(t, dnsPolicy(max), port, zap.NewNop())
			readyOrStopped(t, a, done)
			// The edge moves: DNS names the new address, the old one is
			// gone (its listener and session closed).
			dns.set("127.0.0.3")
			moved := time.Now()
			_ = a.srv.Close()
			readyOrStopped(t, b, done)
			t.Logf("a session with the new address %v after the old one closed (interval %v)", time.Since(moved), dnsPolicy(max).Interval)
			if err := stop(); err != nil {
				t.Fatalf("RunEdges after shutdown = %v, want nil", err)
			}
		})
	}
}

// A session with an address DNS no longer lists is kept while it lasts
// (live work is never cut because DNS changed); once it drops, the node
// does not reconnect there.
func TestLiveSessionOutlastsItsAddressLeavingDNS(t *testing.T) {
	edges, port := edgesOnOnePort(t, "127.0.0.2", "127.0.0.3")
	a, b := edges[0], edges[1]
	// 127.0.0.4 refuses: its failed attempts have the name looked up
	// again while a's session is up.
	dns := newMovableDNS(t, "127.0.0.2", "127.0.0.4")
	done, stop := runNamed(t, dnsPolicy(0), port, zap.NewNop())
	ca := a.nextReady(t)
	dns.set("127.0.0.3")
	readyOrStopped(t, b, done)
	if tr := command(t, ca, CmdTransport); tr["connected"] != true {
		t.Fatalf("a: transport = %v after DNS stopped listing a, want its session up", tr)
	}
	n := dns.lookups.Load()
	_ = ca.Close()
	// The lost session has the name looked up again (still without a);
	// then a is given several reconnect intervals to be (wrongly) dialled.
	deadline := time.Now().Add(30 * time.Second)
	for dns.lookups.Load() == n {
		if time.Now().After(deadline) {
			t.Fatal("no lookup after a session was lost")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * dnsPolicy(0).Interval)
	if got := a.registrations(); got != 1 {
		t.Fatalf("%d registrations with a, want 1 (no reconnect to an address DNS no longer lists)", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}

// The attempt budget is the name's: one address that keeps failing
// spends it exactly (lookups that fail meanwhile keep the address and
// do not count twice), and several addresses that all keep failing spend
// one budget between them, not one each.
func TestEdgeNameWhoseAddressesAllFailSpendsOneBudget(t *testing.T) {
	refuse := func(int) iop.RejectCode { return iop.RejectCode_REJECT_CODE_UNAVAILABLE }
	t.Run("one address, DNS failing", func(t *testing.T) {
		edges, port := scriptedEdgesOnOnePort(t, refuse, "127.0.0.2")
		lookups := stubDNS(t, func(n int) ([]string, error) {
			if n == 0 {
				return []string{"127.0.0.2"}, nil
			}
			return nil, &net.DNSError{Err: "server misbehaving", Name: "edge.test", IsTemporary: true}
		})
		err := RunEdges(context.Background(), dnsPolicy(3), []string{net.JoinHostPort("edge.test", port)}, true, newTestAgent(t), zap.NewNop())
		if !errors.Is(err, ErrAttemptsExhausted) || errors.Is(err, ErrNoEdge) {
			t.Fatalf("err = %v, want the address's attempts exhausted", err)
		}
		if got := edges[0].registrations(); got != 3 {
			t.Fatalf("%d registrations, want exactly 3", got)
		}
		if lookups.Load() < 2 {
			t.Fatalf("%d lookups, want the name looked up again after failures", lookups.Load())
		}
	})
	t.Run("two addresses", func(t *testing.T) {
		edges, port := scriptedEdgesOnOnePort(t, refuse, "127.0.0.2", "127.0.0.3")
		newMovableDNS(t, "127.0.0.2", "127.0.0.3")
		err := RunEdges(context.Background(), dnsPolicy(4), []string{net.JoinHostPort("edge.test", port)}, true, newTestAgent(t), zap.NewNop())
		if !errors.Is(err, ErrAttemptsExhausted) {
			t.Fatalf("err = %v, want exhaustion", err)
		}
		// Both addresses are dialled at once: the attempt under way at the
		// other address when the budget ran out may still be made.
		if got := edges[0].registrations() + edges[1].registrations(); got < 4 || got > 5 {
			t.Fatalf("%d registrations, want 4 (5 with the one under way)", got)
		}
	})
}

// While the node is connected it does not look the name up: no DNS load
// for a healthy node, whatever the reconnect interval.
func TestNoEdgeLookupsWhileConnected(t *testing.T) {
	edges, port := edgesOnOnePort(t, "127.0.0.2")
	dns := newMovableDNS(t, "127.0.0.2")
	done, stop := runNamed(t, dnsPolicy(0), port, zap.NewNop())
	readyOrStopped(t, edges[0], done)
	n := dns.lookups.Load()
	time.Sleep(50 * dnsPolicy(0).Interval)
	// One lookup may have raced the session's ready.
	if got := dns.lookups.Load() - n; got > 1 {
		t.Fatalf("%d lookups in 50 reconnect intervals while connected, want none", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}

// refusingListeners listens on each of ips at one port and counts the
// connections each gets, closing them at once (the node's handshake
// fails).
type refusingListeners struct {
	port string
	hits []atomic.Int32
}

func startRefusingListeners(t *testing.T, ips []string) *refusingListeners {
	t.Helper()
	r := &refusingListeners{hits: make([]atomic.Int32, len(ips))}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the listeners' Close (cleanups run last first)
	for i, ip := range ips {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, r.port))
		if err != nil {
			t.Skipf("cannot listen on %s: %v", ip, err)
		}
		if i == 0 {
			_, r.port, _ = net.SplitHostPort(ln.Addr().String())
		}
		wg.Add(1)
		// Owner: the test; stops at ln.Close in Cleanup.
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				r.hits[i].Add(1)
				_ = c.Close()
			}
		}()
		t.Cleanup(func() { _ = ln.Close() })
	}
	return r
}

func (r *refusingListeners) reached() (n int, first []int) {
	for i := range r.hits {
		if r.hits[i].Load() > 0 {
			n++
			first = append(first, i)
		}
	}
	return n, first
}

// A name answering with more addresses than maxAddressesPerName gets that
// many supervisors, the same ones at every lookup (the lowest addresses),
// and the excess is logged once.
func TestEdgeNameAddressesAreCapped(t *testing.T) {
	const total = maxAddressesPerName + 6
	ips := make([]string, total)
	for i := range ips {
		ips[i] = fmt.Sprintf("127.0.1.%d", i+1)
	}
	r := startRefusingListeners(t, ips)
	// DNS answers in another order at every lookup.
	lookups := stubDNS(t, func(n int) ([]string, error) {
		out := make([]string, total)
		for i := range out {
			out[i] = ips[(i*11+n)%total] // 11 is prime to total: every address, once
		}
		return out, nil
	})
	core, logs := observer.New(zapcore.WarnLevel)
	policy := dnsPolicy(0)
	policy.Interval = 100 * time.Millisecond
	_, stop := runNamed(t, policy, r.port, zap.New(core))
	deadline := time.Now().Add(30 * time.Second)
	for n, _ := r.reached(); n < maxAddressesPerName || lookups.Load() < 4; n, _ = r.reached() {
		if time.Now().After(deadline) {
			t.Fatalf("%d addresses dialled after %d lookups, want %d", n, lookups.Load(), maxAddressesPerName)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
	n, reached := r.reached()
	if n != maxAddressesPerName || reached[n-1] != maxAddressesPerName-1 {
		t.Fatalf("addresses dialled: %v, want the first %d", reached, maxAddressesPerName)
	}
	if got := logs.FilterMessage("edge name has more addresses than are followed").Len(); got != 1 {
		t.Fatalf("excess logged %d times over %d lookups, want once", got, lookups.Load())
	}
}

// An address that keeps failing while another address of its name has a
// ready session does not spend the name's budget (the name is reachable):
// it is retried. Once every address of the name fails, the budget is
// spent as one address's would be.
func TestEdgeNameBudgetIsNotSpentWhileAnotherAddressIsReady(t *testing.T) {
	// a accepts its first registration only.
	edges, port := scriptedEdgesOnOnePort(t, func(n int) iop.RejectCode {
		if n > 0 {
			return iop.RejectCode_REJECT_CODE_UNAVAILABLE
		}
		return iop.RejectCode_REJECT_CODE_UNSPECIFIED
	}, "127.0.0.2")
	a := edges[0]
	// c holds the node's connections until a is ready, then closes them
	// (the node's handshake with c fails) and every later one at once.
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.3", port))
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.3:%s: %v", port, err)
	}
	var cHits atomic.Int32
	gate := make(chan struct{})
	var held sync.WaitGroup
	t.Cleanup(held.Wait)
	t.Cleanup(func() { _ = ln.Close() })
	held.Add(1)
	// Owner: the test; stops at ln.Close in Cleanup.
	go func() {
		defer held.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cHits.Add(1)
			held.Add(1)
			// Owner: the test; ends when gate is closed.
			go func() { defer held.Done(); <-gate; _ = c.Close() }()
		}
	}()
	gateOnce := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(gateOnce)
	newMovableDNS(t, "127.0.0.2", "127.0.0.3")
	done, _ := runNamed(t, dnsPolicy(2), port, zap.NewNop())
	ca := a.nextReady(t)
	// A command answered on a's session: the node has noted it ready.
	if tr := command(t, ca, CmdTransport); tr["connected"] != true {
		t.Fatalf("a: transport = %v, want its session up", tr)
	}
	gateOnce()
	deadline := time.Now().Add(30 * time.Second)
	for cHits.Load() < 6 {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("RunEdges returned %v after %d attempts with c while a was ready", err, cHits.Load())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts with c while a was ready, want c retried", cHits.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if tr := command(t, ca, CmdTransport); tr["connected"] != true {
		t.Fatalf("a: transport = %v, want its session up", tr)
	}
	// a's session ends and a refuses from now on: both addresses fail.
	_ = ca.Close()
	select {
	case err := <-done:
		done <- err
		if !errors.Is(err, ErrAttemptsExhausted) {
			t.Fatalf("err = %v, want exhaustion", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunEdges did not give up once every address of the name failed")
	}
}
