package cluster

import (
	"context"
	"errors"
	"testing"
)

// A ledger key holding another program's value (a string, say) is
// ErrWrongType, not ErrUnavailable: Redis answers, and only that key's
// resource cannot be counted. The key is left as it is.
func TestTakeOnKeyOfAnotherType(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key, wait := Key("n", "p"), WaitKey("m", 0)
	for _, broken := range []string{key, key + ":long", wait} {
		if err := rdb.Set(ctx, broken, "someone else's", 0).Err(); err != nil {
			t.Fatal(err)
		}
		out, err := l.Take(ctx, key, 4, 4, true, l.NewLeaseID(), wait, "", 0, 0)
		if !errors.Is(err, ErrWrongType) || errors.Is(err, ErrUnavailable) || out == Taken {
			t.Fatalf("%s a string: take = %v, %v; want %v", broken, out, err, ErrWrongType)
		}
		if v := rdb.Get(ctx, broken).Val(); v != "someone else's" {
			t.Fatalf("%s changed to %q", broken, v)
		}
		if err := rdb.Del(ctx, broken).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := l.Take(ctx, key, 4, 4, true, l.NewLeaseID(), wait, "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take once the keys are gone: %v %v", out, err)
	}
}
