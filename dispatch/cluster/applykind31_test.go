package cluster

import (
	"context"
	"errors"
	"testing"
)

// An update of a kind Apply does not know is refused before anything is
// sent: the lease put back before it in the same batch is not in Redis,
// and the error is neither an outage nor a refusal (a programming error,
// not Redis's answer).
func TestApplyUnknownKindSendsNothing(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	a := l.NewLeaseID()
	err := l.Apply(ctx, []Update{
		{Kind: OpReadd, Key: key, ID: a},
		{Kind: OpKind(200), Key: key, ID: a},
	})
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused) {
		t.Fatalf("Apply with an unknown kind = %v, want a plain error", err)
	}
	if held := rdb.ZRange(ctx, l.at(key), 0, -1).Val(); len(held) != 0 {
		t.Fatalf("the ledger holds %q: part of a refused batch was sent", held)
	}
}
