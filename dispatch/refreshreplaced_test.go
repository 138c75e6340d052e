package dispatch

import (
	"context"
	"testing"
	"time"
)

// A refresh answered APPLIED for a config that another reload replaced
// while the push was in flight leaves the node running neither the edge's
// config nor the one recorded as running. A later reload back to the
// recorded config must still push to it: otherwise the node keeps running
// the replaced push's config while the edge believes it runs the recorded
// one.
func TestAppliedReplacedRefreshIsPushedAgain(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	orig := f.d.cfg
	received := make(chan struct{})
	release := make(chan struct{})
	refreshes := startApplyingNode(t, f, func(ctx context.Context) (func(), bool) {
		// Hold the answer until the edge's config was replaced.
		close(received)
		select {
		case <-release:
			return nil, true
		case <-ctx.Done():
			return nil, false
		}
	})

	pushed := buildCfg(t, oneNodeCfg(t, 3), oneNodeModels)
	first := make(chan map[string]string, 1)
	// Owner: this test, which reads first below; ends when the node
	// answers the push or waitDeadline passes.
	go func() {
		first <- f.d.ReloadAndRefresh(context.Background(), pushed, waitDeadline)
	}()
	select {
	case <-received:
	case <-time.After(waitDeadline):
		t.Fatal("the node never received the first refresh")
	}
	// Replaced during the round trip; not pushed.
	f.d.Reload(buildCfg(t, oneNodeCfg(t, 4), oneNodeModels))
	close(release)
	if got := (<-first)["n1"]; got != "applied" {
		t.Fatalf("first reload: n1 %q, want applied", got)
	}
	// Back to the config the edge records as running: the node runs the
	// first reload's, so it must be pushed.
	rep := f.d.ReloadAndRefresh(context.Background(), orig, waitDeadline)
	if got := rep["n1"]; got != "applied" {
		t.Fatalf("reload back: n1 %q (report %v), want applied: the node was left running the replaced push's config", got, rep)
	}
	if got := refreshes.Load(); got != 2 {
		t.Fatalf("node received %d refreshes, want 2", got)
	}
	// Now known again: the same config pushes nothing.
	if rep = f.d.ReloadAndRefresh(context.Background(), orig, waitDeadline); len(rep) != 0 {
		t.Fatalf("third reload pushed again: %v", rep)
	}
}
