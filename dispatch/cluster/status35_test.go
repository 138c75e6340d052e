package cluster

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"
)

// A hostile or huge pending set keeps the status's reads bounded: of 300
// edges in the set at most maxEdges hashes are read, a hash of more than
// maxModels fields and figures that are not whole numbers from 1 to
// maxFigure are not counted, an edge whose hash is gone leaves the set,
// and a status of three keys counts each (another program's key of
// another type is a refusal, Redis answered).
func TestAStatusReadsBoundedFigures(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	members := make([]any, 300)
	for i := range members {
		e := "e" + strconv.Itoa(i)
		members[i] = e
		if i < 290 { // ten are gone (expired)
			if err := rdb.HSet(ctx, l.pendingKeys+e, "m", 1).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := rdb.SAdd(ctx, l.pendingEdges, members...).Err(); err != nil {
		t.Fatal(err)
	}
	_, pending, err := l.Status(ctx, nil)
	if err != nil || pending["m"] > maxEdges || pending["m"] < maxEdges-10 {
		t.Fatalf("pending of 300 edges: %v %v; want between %d and %d", pending, err, maxEdges-10, maxEdges)
	}
	if n := rdb.SCard(ctx, l.pendingEdges).Val(); n >= 300 {
		t.Fatalf("%d edges left in the set, want the gone ones read removed", n)
	}
	if err := rdb.Del(ctx, l.pendingEdges).Err(); err != nil {
		t.Fatal(err)
	}
	big := make([]any, 0, 2*(maxModels+1))
	for i := range maxModels + 1 {
		big = append(big, "m"+strconv.Itoa(i), 1)
	}
	writes := map[string][]any{
		"big": big, "odd": {"m", "1.5", "n", "-2", "o", "x", "p", strconv.Itoa(maxFigure + 1), "q", "3"},
	}
	for e, kv := range writes {
		if err := rdb.HSet(ctx, l.pendingKeys+e, kv...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.SAdd(ctx, l.pendingEdges, e).Err(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := Key("n", "a"), Key("n", "b")
	takeN(t, l, a, 2)
	held, pending, err := l.Status(ctx, []string{a, b})
	if err != nil || !maps.Equal(pending, map[string]int{"q": 3}) || !maps.Equal(held, map[string]int{a: 2, b: 0}) {
		t.Fatalf("status: held %v, pending %v, %v; want %s: 2, %s: 0 and only q: 3", held, pending, err, a, b)
	}
	if err := rdb.Set(ctx, b, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Status(ctx, []string{a, b}); !errors.Is(err, ErrRefused) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("status with a key of another type: %v, want %v", err, ErrRefused)
	}
}
