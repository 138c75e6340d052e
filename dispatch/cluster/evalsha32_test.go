package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster/clustertest"
)

// infoField is clustertest.InfoField.
func infoField(t *testing.T, rdb *redis.Client, section, prefix, name string) int64 {
	t.Helper()
	return clustertest.InfoField(t, rdb, section, prefix, name)
}

// evalCalls is how many EVALs (bodies) and EVALSHAs Redis has run.
func evalCalls(t *testing.T, rdb *redis.Client) (eval, evalsha int64) {
	t.Helper()
	return infoField(t, rdb, "commandstats", "cmdstat_eval:", "calls"), infoField(t, rdb, "commandstats", "cmdstat_evalsha:", "calls")
}

// takeN takes n leases of key on l and returns their ids.
func takeN(t *testing.T, l *Ledger, key string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = l.NewLeaseID()
		if out, err := l.Take(context.Background(), key, n, n, false, ids[i], "", "", 0, 0); out != Taken || err != nil {
			t.Fatalf("take %d: %v %v", i, out, err)
		}
	}
	return ids
}

// Apply sends its scripts by SHA1: in the steady state a batch is one
// round trip of EVALSHAs, no body. After SCRIPT FLUSH (as after a Redis
// restart) the batch still applies, its bodies sent once more (EVAL),
// which loads them for the next batches. The old code sent every body on
// every batch.
func TestApplySendsScriptsByHashAndTheirBodiesAfterAFlush(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key, wait := Key("n", "p"), WaitKey("m", 0)
	ids := takeN(t, l, key, 3)
	apply := func(u ...Update) {
		t.Helper()
		if err := l.Apply(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	apply(Update{Kind: OpReturn, Key: key, ID: ids[0]}) // loads return.lua
	eval0, sha0 := evalCalls(t, rdb)
	apply(Update{Kind: OpReturn, Key: key, ID: ids[1]})
	if eval1, sha1 := evalCalls(t, rdb); eval1 != eval0 || sha1 != sha0+1 {
		t.Fatalf("a warm batch of one return ran %d EVAL and %d EVALSHA, want 0 and 1", eval1-eval0, sha1-sha0)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	apply(Update{Kind: OpWait, Key: wait, ID: "w1"}, Update{Kind: OpReturn, Key: key, ID: ids[2]}, Update{Kind: OpUnwait, Key: wait, ID: "w1"})
	if inSet(t, rdb, key, ids[2]) || inSet(t, rdb, wait, "w1") {
		t.Fatal("the batch sent after SCRIPT FLUSH did not apply in order")
	}
	for _, s := range []*redis.Script{waitScript, returnScript} {
		if ok, err := rdb.ScriptExists(ctx, s.Hash()).Result(); err != nil || !ok[0] {
			t.Fatalf("script %s not loaded again after the flush (%v)", s.Hash(), err)
		}
	}
	eval2, _ := evalCalls(t, rdb)
	apply(Update{Kind: OpWait, Key: wait, ID: "w2"}, Update{Kind: OpUnwait, Key: wait, ID: "w2"})
	if eval3, _ := evalCalls(t, rdb); eval3 != eval2 {
		t.Fatalf("%d bodies sent again once the scripts were loaded", eval3-eval2)
	}
}

// A batch of one return costs a fraction of the script's body on the
// wire (INFO's total_net_input_bytes, the INFO command itself included):
// the old code sent return.lua whole, comments and all.
func TestApplyBatchBytes(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	ids := takeN(t, l, key, 2)
	if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: ids[0]}}); err != nil {
		t.Fatal(err)
	}
	before := infoField(t, rdb, "stats", "total_net_input_bytes:", "")
	if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: ids[1]}}); err != nil {
		t.Fatal(err)
	}
	sent := infoField(t, rdb, "stats", "total_net_input_bytes:", "") - before
	t.Logf("a batch of one return: %d bytes in (return.lua is %d)", sent, len(returnSrc))
	if sent >= int64(len(returnSrc)) {
		t.Fatalf("a warm batch of one return sent %d bytes, not less than the script's %d", sent, len(returnSrc))
	}
}

// A re-add refused NOSCRIPT whose lease's return ran after it in the same
// pipeline (another client loaded return.lua, not readd.lua) is sent
// again before that return, not after it: sending only the NOSCRIPT
// commands again would put the returned lease back, holding its slot for
// nobody for the TTL.
func TestApplyNoScriptKeepsAReaddBeforeItsReturn(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	id := takeN(t, l, key, 1)[0]
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptLoad(ctx, returnSrc).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(ctx, []Update{{Kind: OpReadd, Key: key, ID: id}, {Kind: OpReturn, Key: key, ID: id}}); err != nil {
		t.Fatal(err)
	}
	if inSet(t, rdb, key, id) {
		t.Fatal("the re-add sent again after NOSCRIPT ran after its lease's return: the lease is back")
	}
}

// A renewal sent after SCRIPT FLUSH renews (its body sent once more): the
// lease is not reported lost, and its expiry moves.
func TestRenewAfterAScriptFlush(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	id := takeN(t, l, key, 1)[0]
	if err := rdb.ZAdd(ctx, key, redis.Z{Score: float64(time.Now().Add(time.Second).UnixMilli()), Member: id}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	missing, err := l.Renew(ctx, map[string][]HeldLease{key: {{ID: id}}})
	if err != nil || len(missing) != 0 {
		t.Fatalf("renewal after SCRIPT FLUSH: missing %v, %v; want none, nil", missing, err)
	}
	if exp := rdb.ZScore(ctx, key, id).Val(); exp < float64(time.Now().Add(30*time.Second).UnixMilli()) {
		t.Fatalf("the lease's expiry is %v, not renewed by the minute's TTL", time.UnixMilli(int64(exp)))
	}
}

// Batches applied while another client flushes the script cache over and
// over all apply, in order: every lease taken and then returned is gone,
// whatever command of its batch Redis refused NOSCRIPT.
func TestApplyWhileTheScriptCacheIsFlushed(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	key := Key("n", "p")
	stop := make(chan struct{})
	done := make(chan struct{})
	// Owner: this test; stops when stop is closed.
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				_ = rdb.ScriptFlush(ctx).Err()
			}
		}
	}()
	const rounds = 200
	for i := range rounds {
		id := takeN(t, l, key, 1)[0]
		w := "w" + strconv.Itoa(i)
		err := l.Apply(ctx, []Update{
			{Kind: OpWait, Key: WaitKey("m", 0), ID: w}, {Kind: OpReadd, Key: key, ID: id},
			{Kind: OpReturn, Key: key, ID: id}, {Kind: OpUnwait, Key: WaitKey("m", 0), ID: w},
		})
		if err != nil {
			close(stop)
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	close(stop)
	<-done
	if n := rdb.ZCard(ctx, key).Val(); n != 0 {
		t.Fatalf("%d leases left after %d batches that returned each", n, rounds)
	}
	if n := rdb.ZCard(ctx, WaitKey("m", 0)).Val(); n != 0 {
		t.Fatalf("%d waiters left after %d batches that removed each", n, rounds)
	}
}
