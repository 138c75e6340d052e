package cluster

import (
	"context"
	"errors"
	"testing"
)

// A liveness mark Redis answers with an error reply is ErrRefused, as a
// renewal refused is (renewLeases tells it as a refusal, not an outage);
// with Redis gone it is ErrUnavailable.
func TestAliveErrorReplyIsRefused(t *testing.T) {
	rs, l, _ := ledgerOnRedis(t)
	ctx := context.Background()
	restore := rs.ReadOnly(t)
	err := l.Alive(ctx)
	restore()
	if !errors.Is(err, ErrRefused) || errors.Is(err, ErrUnavailable) || ReplyKind(err) != "READONLY" {
		t.Fatalf("alive on a read-only replica: %v (kind %q); want %v of kind READONLY", err, ReplyKind(err), ErrRefused)
	}
	if err := l.Alive(ctx); err != nil {
		t.Fatalf("alive once Redis takes writes again: %v", err)
	}
	rs.Stop()
	if err := l.Alive(ctx); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused) {
		t.Fatalf("alive with Redis down: %v, want %v", err, ErrUnavailable)
	}
}
