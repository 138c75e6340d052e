package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A tick whose renewal Redis answered NOSCRIPT (its script cache lost: a
// restart, SCRIPT FLUSH) but whose later replies never came (the
// liveness mark's held back past the deadline) was not sent again: the
// pipeline was not answered whole. The renewal never ran, for want of an
// answer, not because Redis refused it: it is ErrUnavailable, as the
// rest of the tick, so that the dispatcher tells an outage (once), not a
// refusal of renewals of kind NOSCRIPT. Before, the renewals' part was
// classed on its own replies alone, all answered, and NOSCRIPT made it
// ErrRefused.
func TestATickCutAfterANoScriptRenewalIsUnanswered(t *testing.T) {
	l, p, rdb := openCutLedger(t)
	ctx := context.Background()
	key := Key("n", "p")
	held := map[string][]HeldLease{key: {{ID: takeN(t, l, key, 1)[0]}}}
	// Warms the connection the tick's pipeline goes on: a fresh one's
	// handshake would be cut instead.
	if r := l.Tick(ctx, held, nil); r.Renew != nil || r.Alive != nil || r.Pending != nil {
		t.Fatalf("first tick: %+v", r)
	}
	// Redis's own NOSCRIPT reply, as it goes on the wire.
	err := rdb.EvalSha(ctx, strings.Repeat("0", 40), nil).Err()
	if !noScript(err) {
		t.Fatalf("evalsha of an unknown hash: %v, want NOSCRIPT", err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The renewal's reply, no more: the rest passes once the tick has
	// returned (callCut fails the test if it waited for the rest).
	var r TickResult
	var took time.Duration
	p.callCut(t, len("-"+err.Error()+"\r\n"), func() {
		start := time.Now()
		r = l.Tick(ctx, held, map[string]int{"m": 1})
		took = time.Since(start)
	})
	if !errors.Is(r.Alive, ErrUnavailable) {
		t.Fatalf("alive with its reply held back: %v after %v; want %v at the %v deadline", r.Alive, took, ErrUnavailable, deadlineTimeout)
	}
	if !errors.Is(r.Renew, errNotSentAgain) {
		t.Fatalf("renewal: %v; want %v", r.Renew, errNotSentAgain)
	}
	for name, err := range map[string]error{"renew": r.Renew, "pending": r.Pending} {
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused) {
			t.Errorf("%s not sent again for want of an answer: %v; want %v, not %v", name, err, ErrUnavailable, ErrRefused)
		}
	}
	if len(r.Missing) != 0 {
		t.Errorf("missing %v after a renewal that never ran, want none", r.Missing)
	}
	checkReplies(t, l, rdb, key)
}

// Each part of a Tick reports its own outcome: with the set of edges
// publishing pending figures made a string by another program, Redis
// refuses the publication (WRONGTYPE) and nothing else, so the renewal
// and the liveness mark are reported accepted and the figures refused,
// not the other way round; and an edge with no figures (which leaves
// the set: SREM) is refused alike.
func TestATickReportsARefusedPublicationAsItsOwn(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	held := map[string][]HeldLease{key: {{ID: takeN(t, l, key, 1)[0]}}}
	if err := rdb.Set(ctx, l.pendingEdges, "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, pending := range []map[string]int{{"m": 1}, nil} {
		r := l.Tick(ctx, held, pending)
		if r.Renew != nil || r.Alive != nil || len(r.Missing) != 0 {
			t.Fatalf("tick with %v: %+v; want the renewal and the liveness mark accepted", pending, r)
		}
		if !errors.Is(r.Pending, ErrRefused) || ReplyKind(r.Pending) != "WRONGTYPE" {
			t.Fatalf("publication of %v on a set of another type: %v; want %v (WRONGTYPE)", pending, r.Pending, ErrRefused)
		}
	}
	if n := rdb.Exists(ctx, l.edgeKeys+"e").Val(); n != 1 {
		t.Fatal("the edge not marked live")
	}
}
