package dispatch

import (
	"context"
	"strings"
	"testing"
)

// A conversation whose turn failed over continues where it landed, not on
// the provider it failed on, whichever is listed first: both were sent
// the turn's prompt, but only the failover target holds it.
func TestPrefixAffinityFollowsFailover(t *testing.T) {
	f := routingFixture(t, "prefix_affinity") // a/p listed before a/q
	turn := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("Tell me about tides. ", 60) + `"}`)
	first := mustAcquire(t, f.d, Request{Model: "m", Prompt: turn})
	if first.ProviderID != "p" {
		t.Fatalf("first attempt on %s, want p (first listed, all idle)", first.ProviderID)
	}
	next := mustAcquire(t, f.d, Request{Model: "m", Prompt: turn, NoWait: true,
		Avoid: []ProviderRef{{Node: first.NodeID, Provider: first.ProviderID}}})
	first.Release(ReasonError)
	if next.ProviderID != "q" {
		t.Fatalf("failover on %s, want q", next.ProviderID)
	}
	next.Release(ReasonCompleted)

	later := append(append([]byte(nil), turn...), `,{"role":"assistant","content":"Tides follow the moon."},{"role":"user","content":"And the sun?"}]}`...)
	for range 3 {
		l := mustAcquire(t, f.d, Request{Model: "m", Prompt: later})
		l.Release(ReasonCompleted)
		if l.ProviderID != "q" {
			t.Fatalf("next turn on %s, want q where the conversation failed over to", l.ProviderID)
		}
	}
}

// A failover that finds no other provider leaves the index as it was: the
// request failed, and the provider it failed on still holds what it held.
func TestPrefixAffinityKeptWhenFailoverFindsNone(t *testing.T) {
	f := routingFixture(t, "prefix_affinity")
	turn := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("Tell me about tides. ", 60) + `"}`)
	// q holds all its slots, so the failover from p finds no room.
	var held []*Lease
	for range 4 {
		held = append(held, mustAcquire(t, f.d, Request{Model: "m", NoWait: true, Avoid: []ProviderRef{{Node: "a", Provider: "p"}}}))
	}
	first := mustAcquire(t, f.d, Request{Model: "m", Prompt: turn})
	if first.ProviderID != "p" {
		t.Fatalf("first attempt on %s, want p", first.ProviderID)
	}
	_, err := f.d.Acquire(context.Background(), Request{Model: "m", Prompt: turn, NoWait: true,
		Avoid: []ProviderRef{{Node: "a", Provider: "p"}}})
	wantErr(t, err, ErrNoProvider)
	first.Release(ReasonError)
	for _, l := range held {
		l.Release(ReasonCompleted)
	}
	// Both idle again: least load alone would take p too, so load q a
	// little to show the match, not the order, chooses.
	q := mustAcquire(t, f.d, Request{Model: "m", NoWait: true, Avoid: []ProviderRef{{Node: "a", Provider: "p"}}})
	defer q.Release(ReasonCompleted)
	if l := mustAcquire(t, f.d, Request{Model: "m", Prompt: turn}); l.ProviderID != "p" {
		t.Fatalf("the same prompt on %s, want p which it was sent to", l.ProviderID)
	} else {
		l.Release(ReasonCompleted)
	}
}

// BenchmarkAcquireReleasePrefixAffinity: the fast path on a
// prefix_affinity model with an 8 KiB prompt (hashing, matching and
// recording under the lock).
func BenchmarkAcquireReleasePrefixAffinity(b *testing.B) {
	cfg := buildCfg(b, []tNode{{id: "a", provs: []tProv{{name: "p", cap: 4}, {name: "q", cap: 4}}}},
		[]tModel{{name: "m", cands: []string{"a/p", "a/q"}}})
	cfg.Models[0].Routing = "prefix_affinity"
	if err := cfg.Normalize(); err != nil {
		b.Fatal(err)
	}
	d := benchDispatcher(b, cfg, "a")
	defer d.Close()
	ctx := context.Background()
	req := Request{Model: "m", PromptTokens: 2000, Prompt: []byte(strings.Repeat("A conversation so far. ", 360))}
	b.ReportAllocs()
	for b.Loop() {
		l, err := d.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		l.Release(ReasonCompleted)
	}
}
