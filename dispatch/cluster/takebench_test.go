package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// BenchmarkTakeReturn is one grant's ledger cost as a request not queued
// pays it: the take (with the fairness check) and the return with its
// announcement, against a redis-server on loopback.
func BenchmarkTakeReturn(b *testing.B) {
	rs := testredis.Start(b)
	l := Open(Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "bench"})
	b.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()
	key, wait := Key("n", "p"), WaitKey("m", 0)
	b.ReportAllocs()
	for b.Loop() {
		id := l.NewLeaseID()
		if out, err := l.Take(ctx, key, 1, 1, false, id, wait, "", 0, 0); out != Taken || err != nil {
			b.Fatalf("take: %v %v", out, err)
		}
		if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTakeForReturn is BenchmarkTakeReturn as the dispatcher takes:
// with the resource's pinned wait set too (empty, as it usually is).
func BenchmarkTakeForReturn(b *testing.B) {
	rs := testredis.Start(b)
	l := Open(Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "bench"})
	b.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()
	key, wait := Key("n", "p"), WaitKey("m", 0)
	pin := PinWaitKey(key, 0)
	b.ReportAllocs()
	for b.Loop() {
		id := l.NewLeaseID()
		if out, err := l.TakeFor(ctx, key, 1, 1, false, id, wait, pin, "", 0, 0); out != Taken || err != nil {
			b.Fatalf("take: %v %v", out, err)
		}
		if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id}}); err != nil {
			b.Fatal(err)
		}
	}
}
