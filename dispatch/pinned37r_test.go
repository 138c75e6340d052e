package dispatch

import (
	"context"
	"errors"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A node's report that drains all its providers at once (a node drains
// every provider or none) unpins the follow-ups pinned to the first one
// it lists, and must not hand them a slot of another provider the same
// report drains. Before, the unpinning (and its pump) ran in the middle of
// the report: a/q, not yet marked draining, was granted to the follow-up.
func TestPinnedDrainReportGrantsNoDrainingProvider37r(t *testing.T) {
	cfg := buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}, {name: "q", cap: 1}}}},
		[]tModel{{name: "m", timeout: 60, cands: []string{"a/p", "a/q"}}})
	f := newFixture(t, cfg, nil)
	ca := f.up("a")
	la := mustAcquire(t, f.d, Request{Model: "m"})
	if la.ProviderID != "p" {
		t.Fatalf("first lease on %s, want p", la.ProviderID)
	}
	f.d.RememberResponse("resp_p", la)
	fu := f.enqueue(context.Background(), Request{Model: "m", PreviousResponseID: "resp_p"})
	// a/q is free: the follow-up waits for a/p.
	f.d.Load(ca, drainingReport("p", "q"))
	st := f.d.Status()
	if n, q := pendingOf(st, "m"), provOf(st, "a", "q").InFlight; n != 1 || q != 0 {
		t.Fatalf("after the drain report: pending %d, a/q in flight %d; want the follow-up still queued, nothing on a/q", n, q)
	}
	select {
	case r := <-fu:
		t.Fatalf("the follow-up was settled by a drain (lease %v, err %v)", r.l != nil, r.err)
	default:
	}
}

// A reload that takes the pinned provider away and, in the same step,
// drops another provider from the model unpins the follow-up against the
// new candidates only. Before, the unpinning ran (and pumped) in the
// middle of the reload, while the model still listed its old candidates:
// b/p, which the new config drops from m, was granted to it.
func TestPinnedReloadUnpinsToNewCandidates37r(t *testing.T) {
	nodes := func(aProv string) []tNode {
		return []tNode{
			{id: "a", provs: []tProv{{name: aProv, cap: 1}}},
			{id: "b", provs: []tProv{{name: "p", cap: 1}}},
			{id: "c", provs: []tProv{{name: "p", cap: 1}}},
		}
	}
	cfg := buildCfg(t, nodes("p"), []tModel{{name: "m", timeout: 60, cands: []string{"a/p", "b/p"}}, {name: "other", cands: []string{"c/p"}}})
	for name, removed := range map[string]func(t *testing.T, f *fixture){
		"provider removed": func(t *testing.T, f *fixture) {
			f.d.Reload(buildCfg(t, nodes("q"), []tModel{{name: "m", timeout: 60, cands: []string{"c/p"}}, {name: "other", cands: []string{"b/p", "a/q"}}}))
		},
		"node removed": func(t *testing.T, f *fixture) {
			f.d.Reload(buildCfg(t, nodes("p")[1:], []tModel{{name: "m", timeout: 60, cands: []string{"c/p"}}, {name: "other", cands: []string{"b/p"}}}))
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, cfg, nil)
			// A real session for a: a reload removing the node closes it.
			_, addr := startWire(t, f)
			cc := dialNode(t, addr, "a")
			if err := cc.Ready(context.Background(), "a"); err != nil {
				t.Fatalf("ready: %v", err)
			}
			waitFor(t, "a ready", func() bool { return nodeOf(f.d.Status(), "a").Connected })
			f.up("b")
			f.up("c")
			la := mustAcquire(t, f.d, Request{Model: "m"})
			if la.NodeID != "a" {
				t.Fatalf("first lease on %s, want a", la.NodeID)
			}
			f.d.RememberResponse("resp_a", la)
			fu := f.enqueue(context.Background(), Request{Model: "m", PreviousResponseID: "resp_a"})
			removed(t, f)
			if l := recvLease(t, fu); l.NodeID != "c" {
				t.Fatalf("the follow-up was granted %s/%s, want c/p (m's only candidate now)", l.NodeID, l.ProviderID)
			}
		})
	}
}

// A follow-up that needs the tunnel is not pinned to a provider that has
// not declared it can serve it (its node's new session declared no
// adapters): that provider would never be granted to it, and it would
// wait out its queue timeout beside a free candidate that can.
func TestPinnedNotToProviderThatCannotServeIt37r(t *testing.T) {
	cfg := pinPairCfg(t, 60, 0)
	for i := range cfg.Nodes {
		cfg.Nodes[i].Providers[0].Type, cfg.Nodes[i].Providers[0].BaseURL = "vllm", "http://127.0.0.1:1/v1"
	}
	f := newFixture(t, cfg, nil)
	ca := f.up("a")
	f.up("b")
	tun := Request{Model: "m", NeedsTunnel: true}
	la := mustAcquire(t, f.d, tun)
	if la.NodeID != "a" {
		t.Fatalf("first lease on %s, want a", la.NodeID)
	}
	f.d.RememberResponse("resp_a", la)
	// a's session ends (la is fenced); its new one declares nothing.
	f.d.Closed(ca, errors.New("lost"))
	c := f.register("a")
	if resp := f.d.Ready(c, &iop.NodeReadyRequest{NodeId: "a"}); !resp.GetReady() {
		t.Fatalf("ready a: refused: %s", resp.GetReason())
	}
	f.d.Activate(c)
	tun.PreviousResponseID = "resp_a"
	if l := mustAcquire(t, f.d, tun); l.NodeID != "b" {
		t.Fatalf("the follow-up was granted %s, want b", l.NodeID)
	}
}

// A pinned waiter counts in its provider's queued, long_queued and waiting
// figures, and in no other provider's.
func TestPinnedCountsAgainstItsProvider37r(t *testing.T) {
	nodes := []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}, {id: "b", provs: []tProv{{name: "p", cap: 1}}}}
	f := newFixture(t, buildCfg(t, nodes, []tModel{{name: "m", long: 100, timeout: 60, cands: []string{"a/p", "b/p"}}}), nil)
	f.up("a")
	f.up("b")
	long := Request{Model: "m", PromptTokens: 100}
	la := mustAcquire(t, f.d, long)
	if la.NodeID != "a" {
		t.Fatalf("first lease on %s, want a", la.NodeID)
	}
	f.d.RememberResponse("resp_a", la)
	long.PreviousResponseID = "resp_a"
	f.enqueue(context.Background(), long)
	st := f.d.Status()
	for _, c := range []struct {
		node string
		want int32
	}{{"a", 1}, {"b", 0}} {
		p := provOf(st, c.node, "p")
		if p.Queued != c.want || p.LongQueued != c.want || p.Waiting != c.want {
			t.Errorf("%s/p: queued %d, long_queued %d, waiting %d; want %d each", c.node, p.Queued, p.LongQueued, p.Waiting, c.want)
		}
	}
}

// A reload that drops the model fails its pinned waiters with
// ErrModelNotFound at once, as its other waiters.
func TestPinnedModelRemovedFails37r(t *testing.T) {
	f, _, _, _ := pinPair(t, 60, 0)
	fu := f.enqueue(context.Background(), followUp)
	f.d.Reload(buildCfg(t, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 1}}}, {id: "b", provs: []tProv{{name: "p", cap: 1}}}},
		[]tModel{{name: "other", cands: []string{"a/p", "b/p"}}}))
	wantErr(t, recv(t, fu).err, ErrModelNotFound)
}

// A model's list of waiters pinned to a provider goes once it is empty,
// however its last waiter left (granted, cancelled, timed out): nothing
// is kept for a provider nobody waits for.
func TestPinnedListsGoWhenEmpty37r(t *testing.T) {
	f, _, _, la := pinPair(t, 0.3, 0)
	lists := func() int {
		f.d.mu.Lock()
		defer f.d.mu.Unlock()
		return len(f.d.models["m"].pinned)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := f.enqueue(ctx, followUp)
	if n := lists(); n != 1 {
		t.Fatalf("%d lists of pinned waiters, want 1", n)
	}
	cancel()
	wantErr(t, recv(t, cancelled).err, context.Canceled)
	if n := lists(); n != 0 {
		t.Fatalf("%d lists of pinned waiters after the cancel, want 0", n)
	}
	wantErr(t, recv(t, f.enqueue(context.Background(), followUp)).err, ErrQueueTimeout)
	if n := lists(); n != 0 {
		t.Fatalf("%d lists of pinned waiters after the timeout, want 0", n)
	}
	granted := f.enqueue(context.Background(), followUp)
	la.Release(ReasonCompleted)
	if l := recvLease(t, granted); l.NodeID != "a" {
		t.Fatalf("granted %s, want a", l.NodeID)
	}
	if n := lists(); n != 0 {
		t.Fatalf("%d lists of pinned waiters after the grant, want 0", n)
	}
}
