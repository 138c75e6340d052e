package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A take Redis refuses by an ACL is ErrRefused of kind NOPERM, whether the
// ACL denies the one resource's key (its key pattern) or the script
// command for every key: the reply's kind cannot tell a refusal of one key
// from one of all of them (only its text does, which the ledger does not
// read), so a refused take is not taken as the resource's alone and
// passed over for another candidate, as ErrWrongType is (the take's own
// check of the key's type). Every other error reply a take can get
// (OOM, READONLY, LOADING, MISCONF, BUSY, MASTERDOWN) is the server's.
func TestTakeRefusedByAnACLIsOneKindForOneKeyAndForAll(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	plain := rs.Client(t)
	if err := plain.Do(ctx, "ACL", "SETUSER", "admin", "on", ">admin", "allkeys", "allchannels", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: rs.Addr, Username: "admin", Password: "admin"})
	t.Cleanup(func() { _ = admin.Close() })
	l := ledger(t, rs.Addr, "e", time.Minute)
	ok, denied := Key("n", "ok"), Key("n", "denied")
	cases := []struct {
		name string
		acl  []any // applied to the default user, the ledger's
		key  string
	}{
		{"one key", []any{"resetkeys", "~iop:lease:n/ok*", "~iop:wait:*", "~iop:edge:*", "~iop:returned:*"}, denied},
		{"the script command", []any{"allkeys", "-evalsha", "-eval"}, ok},
	}
	var kinds []string
	for _, c := range cases {
		if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", "default", "reset", "on", "nopass", "allchannels", "+@all"}, c.acl...)...).Err(); err != nil {
			t.Fatal(err)
		}
		if c.key == denied {
			if out, err := l.Take(ctx, ok, 1, 1, false, l.NewLeaseID(), WaitKey("m", 0), "", 0, 0); out != Taken || err != nil {
				t.Fatalf("%s: take on the key the ACL allows: %v %v", c.name, out, err)
			}
		}
		_, err := l.Take(ctx, c.key, 1, 1, false, l.NewLeaseID(), WaitKey("m", 0), "", 0, 0)
		if !errors.Is(err, ErrRefused) || errors.Is(err, ErrWrongType) {
			t.Fatalf("%s: take refused by the ACL: %v; want %v, not %v", c.name, err, ErrRefused, ErrWrongType)
		}
		kinds = append(kinds, ReplyKind(err))
	}
	if kinds[0] != "NOPERM" || kinds[1] != kinds[0] {
		t.Fatalf("refusal kinds %q; want NOPERM for both", kinds)
	}
}
