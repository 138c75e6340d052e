package cluster

import (
	"context"
	"testing"
	"time"
)

// Mutants of responses.go (the Responses ids shared through Redis) that
// no test can tell from the code, so none is written for them:
//   - RememberResponses without its early return for no owners: an empty
//     pipeline answers nil as the early return does, and the dispatcher
//     never writes an empty batch.
//   - RememberResponses and ResponseOwner without their own
//     context.WithTimeout: the client's ReadTimeout, WriteTimeout and
//     DialTimeout are the ledger's timeout (Open), and go-redis takes a
//     context's deadline only when it is earlier, so each round trip is
//     bounded alike.
//   - RememberResponses taking redis.Nil as a failure: SET NX answers
//     nil when the key exists, which go-redis reads as false, not as
//     redis.Nil, so Exec never returns it for these pipelines.

// A ttl under a second is written as one second, not as no expiry at all
// (go-redis writes a zero expiration as a SET without EX): an id must
// expire from Redis as it does from the edge that wrote it.
func TestRememberResponsesSubSecondTTLExpires38m(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	for _, ttl := range []time.Duration{time.Nanosecond, 999 * time.Millisecond, 1500 * time.Millisecond} {
		id := "resp_" + ttl.String()
		if err := l.RememberResponses(ctx, []ResponseOwner{{ID: id, Key: Key("a", "v")}}, ttl); err != nil {
			t.Fatal(err)
		}
		// PTTL: -1 is a key without expiry; one second at most, whole
		// seconds (EX) are written.
		got := rdb.PTTL(ctx, "iop:resp:"+id).Val()
		if got <= 0 || got > time.Second {
			t.Errorf("ttl %v written as PTTL %v, want (0, 1s]", ttl, got)
		}
	}
}
