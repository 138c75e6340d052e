package cluster

import (
	"context"
	"maps"
	"strconv"
	"testing"
)

// Another program's value where the pending figures belong (a string for
// an edge's hash, or for the set of edges) is not counted, as a hostile
// figure is: the status still counts the leases and the other edges'
// figures, and the key is left as it is. Before, the script's HLEN or
// SRANDMEMBER failed it whole, and the admin view read Redis as
// unreachable.
func TestAStatusSkipsPendingKeysOfAnotherType(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	a := Key("n", "a")
	takeN(t, l, a, 2)
	if err := rdb.HSet(ctx, l.pendingKeys+"good", "m", 3).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, l.pendingKeys+"bad", "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.SAdd(ctx, l.pendingEdges, "good", "bad").Err(); err != nil {
		t.Fatal(err)
	}
	held, pending, err := l.Status(ctx, []string{a})
	if err != nil || !maps.Equal(held, map[string]int{a: 2}) || !maps.Equal(pending, map[string]int{"m": 3}) {
		t.Fatalf("status with an edge's key a string: held %v, pending %v, %v; want %s: 2 and m: 3", held, pending, err, a)
	}
	if v := rdb.Get(ctx, l.pendingKeys+"bad").Val(); v != "someone else's" {
		t.Fatalf("the string changed to %q", v)
	}
	if err := rdb.Del(ctx, l.pendingEdges).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, l.pendingEdges, "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	held, pending, err = l.Status(ctx, []string{a})
	if err != nil || !maps.Equal(held, map[string]int{a: 2}) || len(pending) != 0 {
		t.Fatalf("status with the set of edges a string: held %v, pending %v, %v; want %s: 2, nothing pending", held, pending, err, a)
	}
	if v := rdb.Get(ctx, l.pendingEdges).Val(); v != "someone else's" {
		t.Fatalf("the string changed to %q", v)
	}
}

// The status's bounds, as numbers, each at its edge: of 300 edges that
// all publish, exactly 256 hashes are read; a hash of 1,024 models is
// counted, one of 1,025 is not; a figure of 2^30 is counted, 2^30 + 1 and
// 0 are not. (TestAStatusReadsBoundedFigures measures by the constants,
// which a changed constant moves along.)
func TestAStatusBoundsAreTheirNumbers(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	pipe := rdb.Pipeline()
	for i := range 300 {
		e := "e" + strconv.Itoa(i)
		pipe.HSet(ctx, l.pendingKeys+e, "m", 1)
		pipe.SAdd(ctx, l.pendingEdges, e)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, pending, err := l.Status(ctx, nil); err != nil || pending["m"] != 256 {
		t.Fatalf("pending of 300 edges of one waiting request each: %v %v; want m: 256", pending, err)
	}
	if err := rdb.Del(ctx, l.pendingEdges).Err(); err != nil {
		t.Fatal(err)
	}
	writes := map[string][]any{
		"edge": {"max", 1 << 30, "over", 1<<30 + 1, "zero", 0},
	}
	want := map[string]int{"max": 1 << 30}
	for _, h := range []struct {
		edge   string
		models int
	}{{"full", 1024}, {"over", 1025}} {
		kv := make([]any, 0, 2*h.models)
		for i := range h.models {
			m := h.edge + strconv.Itoa(i)
			kv = append(kv, m, 1)
			if h.edge == "full" {
				want[m] = 1
			}
		}
		writes[h.edge] = kv
	}
	for e, kv := range writes {
		if err := rdb.HSet(ctx, l.pendingKeys+e, kv...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.SAdd(ctx, l.pendingEdges, e).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, pending, err := l.Status(ctx, nil)
	if err != nil || !maps.Equal(pending, want) {
		t.Fatalf("pending: %d models (max %d, zero %d, over %d, over0 %d), %v; want the 1,024 of full and max: 2^30",
			len(pending), pending["max"], pending["zero"], pending["over"], pending["over0"], err)
	}
}
