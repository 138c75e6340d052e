package cluster

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster/clustertest"
	"github.com/iop-gateway/iop/internal/testredis"
)

// noHelloPassword is the password of the Redis of noHelloRedis.
const noHelloPassword = "pw33r"

// noHelloRedis starts a redis-server that knows no HELLO (its name
// renamed away: it answers "ERR unknown command", as a Redis 5 does, so
// that go-redis falls back to RESP2) and asks for noHelloPassword (the
// fallback then logs in with AUTH), stopped at the test's end. An ACL
// cannot deny HELLO: Redis lets it through, as it does AUTH. It returns
// the server's address and a client of it that is logged in.
func noHelloRedis(t *testing.T) (string, *redis.Client) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		testredis.Start(t) // skips, or fails under CI, as every Redis test
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--loglevel", "warning", "--requirepass", noHelloPassword, "--rename-command", "HELLO", "")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + port
	rdb := redis.NewClient(&redis.Options{Addr: addr, Password: noHelloPassword, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	// Bounded: 500 tries 20 ms apart, each try bounded by its context.
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return addr, rdb
		}
		if try == 500 {
			t.Fatalf("redis-server on %s does not answer: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// respOf is the protocol (CLIENT LIST's resp=) of each connection named
// name of the Redis rdb is a client of.
func respOf(t *testing.T, rdb *redis.Client, name string) []string {
	t.Helper()
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		var isNamed bool
		var resp string
		for _, f := range strings.Fields(line) {
			switch {
			case f == "name="+name:
				isNamed = true
			case strings.HasPrefix(f, "resp="):
				resp = strings.TrimPrefix(f, "resp=")
			}
		}
		if isNamed {
			out = append(out, resp)
		}
	}
	return out
}

// The ledger works on a Redis that does not speak HELLO (Redis 5, which
// the ledger still supports): the handshake the ledger cut to HELLO alone
// falls back to RESP2 and AUTH, and every call, a NOSCRIPT resend and
// the announcements' subscription included, answers as on Redis 7.
func TestTheLedgerWorksOnARedisWithoutHello(t *testing.T) {
	addr, rdb := noHelloRedis(t)
	ctx := context.Background()
	l := Open(Config{Address: addr, Password: noHelloPassword, TTL: time.Minute, Timeout: 5 * time.Second, EdgeID: "e"})
	t.Cleanup(func() { _ = l.Close() })
	if err := l.Ping(ctx); err != nil {
		t.Fatalf("ping on a Redis without HELLO: %v", err)
	}
	// Name the ledger's connection, to find it in CLIENT LIST: only a
	// connection that fell back to RESP2 (HELLO refused) is resp=2.
	if err := l.Client().Do(ctx, "CLIENT", "SETNAME", "ledger33r").Err(); err != nil {
		t.Fatal(err)
	}
	if got := respOf(t, rdb, "ledger33r"); len(got) != 1 || got[0] != "2" {
		t.Fatalf("the ledger's connection speaks resp %q, want [2]: HELLO was not refused, the test checks nothing", got)
	}
	sub := l.Client().Subscribe(ctx, l.FreedChannel())
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatalf("subscribe on a Redis without HELLO: %v", err)
	}
	freed := sub.Channel()
	key := Key("n", "p")
	if err := rdb.ScriptFlush(ctx).Err(); err != nil { // take by EVALSHA, NOSCRIPT, EVAL
		t.Fatal(err)
	}
	id := l.NewLeaseID()
	if out, err := l.Take(ctx, key, 1, 1, false, id, WaitKey("m", 0), "", 0, 0); out != Taken || err != nil {
		t.Fatalf("take: %v %v", out, err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil { // renew and its resend
		t.Fatal(err)
	}
	if missing, err := l.Renew(ctx, map[string][]HeldLease{key: {{ID: id}}}); err != nil || len(missing) != 0 {
		t.Fatalf("renew: %v %v", missing, err)
	}
	if held, err := l.Held(ctx, []string{key}); err != nil || held[key] != 1 {
		t.Fatalf("held: %v %v", held, err)
	}
	if err := l.Alive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.SetPending(ctx, map[string]int{"m": 2}); err != nil {
		t.Fatal(err)
	}
	if pending, err := l.Pending(ctx); err != nil || pending["m"] != 2 {
		t.Fatalf("pending: %v %v", pending, err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil { // return and its resend
		t.Fatal(err)
	}
	if err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id}}); err != nil || inSet(t, rdb, key, id) {
		t.Fatalf("return: %v (still held: %v)", err, inSet(t, rdb, key, id))
	}
	select {
	case m := <-freed:
		if l.FreedKey(m.Payload) != key {
			t.Fatalf("announced %q, want %s", m.Payload, key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the return was not announced")
	}
}

// On a Redis without HELLO a new connection's handshake is the refused
// HELLO and AUTH, and both count in the deadline of the call that needs
// the connection: a Ping on a new ledger makes three round trips
// (HELLO, AUTH, PING), and with each taking half the timeout it fails at
// the timeout (the client before ContextTimeoutEnabled gave each its own
// read timeout, and answered after three halves of it).
func TestAHandshakeWithoutHelloKeepsToTheCallsDeadline(t *testing.T) {
	addr, rdb := noHelloRedis(t)
	open := func() (*Ledger, *clustertest.Pauser) {
		l := Open(Config{Address: addr, Password: noHelloPassword, TTL: time.Minute, Timeout: deadlineTimeout, EdgeID: "e"})
		t.Cleanup(func() { _ = l.Close() })
		p := clustertest.NewPauser(t, rdb)
		l.Client().AddHook(p)
		return l, p
	}
	// Unpaused, the round trips are counted.
	l, p := open()
	if err := l.Ping(context.Background()); err != nil || p.Trips.Load() != 3 {
		t.Fatalf("ping on a new connection to a Redis without HELLO: %v after %d round trips; want success after 3 (HELLO, AUTH, PING)", err, p.Trips.Load())
	}
	l, p = open()
	pingFailsAtTheDeadline(t, l, p, rdb, deadlineTimeout/2)
	if err := l.Ping(context.Background()); err != nil {
		t.Fatalf("ping after the cut handshake: %v", err)
	}
}
