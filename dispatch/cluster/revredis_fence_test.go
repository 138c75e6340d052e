package cluster

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A fenced return's mark lives as long as a lease does (the TTL, not the
// call timeout): a late re-add can put a lease back for a TTL after it was
// sent, and the mark must outlast it.
func TestFencedReturnMarkLivesForTheLeaseTTL(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	l := Open(Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "a"})
	defer l.Close()
	id := l.NewLeaseID()
	if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: Key("n", "p"), ID: id, Fence: true}}); err != nil {
		t.Fatal(err)
	}
	ttl, err := l.Client().PTTL(ctx, "iop:returned:"+id).Result()
	if err != nil || ttl <= 30*time.Second || ttl > time.Minute {
		t.Fatalf("mark expires in %v (%v), want about the lease TTL (1m)", ttl, err)
	}
}

// A fenced return writes its mark before it removes the lease: Redis runs
// a pipeline's commands one by one, and a late re-add (sent on another
// connection) run between a removal and a mark written after it would put
// the lease back. Redis's MONITOR shows the order the commands ran in.
func TestFencedReturnMarksBeforeItRemoves(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	mon := monitorRedis(t, rs.Addr)
	l := Open(Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "a"})
	defer l.Close()
	id := l.NewLeaseID()
	// Held, so that the return removes it and is announced: the
	// announcement ends the commands read.
	if err := l.Client().ZAdd(ctx, Key("n", "p"), redis.Z{Score: 1 << 50, Member: id}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: Key("n", "p"), ID: id, Fence: true}}); err != nil {
		t.Fatal(err)
	}
	var ran []string
	for {
		line, err := mon.ReadString('\n')
		if err != nil {
			t.Fatalf("monitor: %v (seen %q)", err, ran)
		}
		lower := strings.ToLower(line)
		switch {
		case strings.Contains(lower, `"set"`) && strings.Contains(line, id):
			ran = append(ran, "set")
		case strings.Contains(lower, `"zrem"`) && strings.Contains(line, id):
			ran = append(ran, "zrem")
		}
		if strings.Contains(lower, `"publish"`) {
			break
		}
	}
	if len(ran) != 3 || ran[0] != "set" {
		t.Fatalf("the fenced return ran %q, want the mark first, then both removals", ran)
	}
}

// A re-add of a long lease whose long set holds another program's value
// puts nothing back, not even in the plain set: the script checks both
// keys before writing (a write to the plain set, then an error on the long
// one, would count a lease the long set cannot).
func TestReaddLeavesAKeyOfAnotherTypeAlone(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	l := Open(Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "a"})
	defer l.Close()
	key := Key("n", "p")
	if err := l.Client().Set(ctx, key+":long", "theirs", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(ctx, []Update{{Kind: OpReadd, Key: key, ID: l.NewLeaseID(), Long: true}}); err != nil {
		t.Fatalf("re-add beside a key of another type: %v", err)
	}
	if n := l.Client().Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("the re-add wrote %s beside a long set of another type", key)
	}
	if v := l.Client().Get(ctx, key+":long").Val(); v != "theirs" {
		t.Fatalf("the other program's value is now %q", v)
	}
}

// monitorRedis opens a MONITOR connection to addr and returns its reader
// once Redis has confirmed it (every command run after that is shown).
func monitorRedis(t *testing.T, addr string) *bufio.Reader {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// Bounds every read of the test: a command that never runs fails it.
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if ok, err := r.ReadString('\n'); err != nil || ok != "+OK\r\n" {
		t.Fatalf("MONITOR answered %q (%v)", ok, err)
	}
	return r
}
