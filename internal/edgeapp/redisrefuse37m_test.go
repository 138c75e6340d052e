package edgeapp

import (
	"context"
	"testing"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A Redis on db 0 that answers the start's PING with an error reply of
// its own (here its ACL denies the command: NOPERM) refuses the edge: the
// warning names cluster.redis.address alone, not cluster.redis.db, which
// is not set and so cannot be what Redis refused.
func TestRedisRefusingOnDBZeroNamesOnlyTheAddress37m(t *testing.T) {
	s := testredis.Start(t)
	if err := s.Client(t).Do(context.Background(), "ACL", "SETUSER", "default", "-ping").Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	l, _ := startWarning(t, "cluster: {redis: {address: '"+s.Addr+"', timeout_ms: 2000}}\n", "")
	if keys := warnedKeys(l); len(keys) != 1 || keys[0] != "cluster.redis.address" || l.Message != redisRefusedMsg {
		t.Errorf("warning %q keys %v, want %q naming [cluster.redis.address]", l.Message, keys, redisRefusedMsg)
	}
}
