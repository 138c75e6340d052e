package cluster

import (
	"context"
	"errors"
	"testing"
)

// A take Redis answers with an error reply (here a read-only replica; a
// Redis out of memory refuses a take the same way, tested by
// TestTakeOutOfMemoryIsRefusedBeforeAnyWrite) is ErrRefused, not
// ErrUnavailable: Redis answered, so the script is not still on its way.
// The old code called it an outage.
func TestTakeErrorReplyIsRefused(t *testing.T) {
	rs, l, _ := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	restore := rs.ReadOnly(t)
	out, err := l.Take(ctx, key, 2, 2, false, l.NewLeaseID(), WaitKey("m", 0), "", 0, 0)
	restore()
	if out == Taken || !errors.Is(err, ErrRefused) || errors.Is(err, ErrUnavailable) || ReplyKind(err) != "READONLY" {
		t.Fatalf("take on a read-only replica: %v, %v (kind %q); want %v of kind READONLY", out, err, ReplyKind(err), ErrRefused)
	}
	if out, err := l.Take(ctx, key, 2, 2, false, l.NewLeaseID(), WaitKey("m", 0), "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take once Redis takes writes again: %v %v", out, err)
	}
	rs.Stop()
	if _, err := l.Take(ctx, key, 2, 2, false, l.NewLeaseID(), "", "", 0, 0); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused) {
		t.Fatalf("take with Redis down: %v, want %v", err, ErrUnavailable)
	}
}

// A renewal Redis answers with an error reply is ErrRefused: the leases
// of the refused keys were not extended, and Redis did answer. Keys whose
// renewal Redis ran still report their missing leases.
func TestRenewErrorReplyIsRefused(t *testing.T) {
	rs, l, _ := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	id := l.NewLeaseID()
	if out, err := l.Take(ctx, key, 2, 2, false, id, "", "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	restore := rs.OutOfMemory(t)
	_, err := l.Renew(ctx, map[string][]HeldLease{key: {{ID: id}}})
	restore()
	if !errors.Is(err, ErrRefused) || errors.Is(err, ErrUnavailable) || ReplyKind(err) != "OOM" {
		t.Fatalf("renew out of memory: %v (kind %q); want %v of kind OOM", err, ReplyKind(err), ErrRefused)
	}
	if missing, err := l.Renew(ctx, map[string][]HeldLease{key: {{ID: id}}, Key("n", "q"): {{ID: "e/lost"}}}); err != nil || len(missing) != 1 || len(missing[Key("n", "q")]) != 1 {
		t.Fatalf("renew once Redis takes writes again: missing %v, %v; want only e/lost", missing, err)
	}
	rs.Stop()
	if _, err := l.Renew(ctx, map[string][]HeldLease{key: {{ID: id}}}); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused) {
		t.Fatalf("renew with Redis down: %v, want %v", err, ErrUnavailable)
	}
}
