package dispatch

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// budgetProxy is a loopback proxy in front of a redis-server that passes
// every command on and, once armed with a budget, passes that many more
// bytes of Redis's answers and throws the rest away: a reply cut after
// the replies before it (a connection lost mid-round-trip).
type budgetProxy struct {
	addr string
	// budget is how many more bytes from Redis pass; negative: all.
	budget atomic.Int64
}

func newBudgetProxy(t *testing.T, target string) *budgetProxy {
	t.Helper()
	p := &budgetProxy{}
	p.budget.Store(-1)
	p.addr = replyProxy(t, target, p.take)
	return p
}

// replyProxy is a loopback proxy in front of the Redis at target that
// passes every command on and, of each chunk of n bytes Redis answers,
// the first pass(n) (at most n), throwing the rest away. It returns the
// proxy's address.
func replyProxy(t *testing.T, target string, pass func(n int) int) string {
	t.Helper()
	ln := listenProxy(t, target, func(c, s net.Conn) {
		// Owner: the proxy. Stops when either side closes.
		go func() {
			_, _ = io.Copy(s, c)
			_ = s.Close()
			_ = c.Close()
		}()
		// Owner: the proxy. Stops when either side closes.
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if k := pass(n); k > 0 {
					if _, werr := c.Write(buf[:k]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = s.Close()
			_ = c.Close()
		}()
	})
	// The connections' copiers end when the ledger is closed (an earlier
	// cleanup) or redis-server stops (a later one).
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

// take spends up to n bytes of the budget and reports how many pass.
func (p *budgetProxy) take(n int) int {
	for {
		b := p.budget.Load()
		if b < 0 {
			return n
		}
		k := min(int64(n), b)
		if p.budget.CompareAndSwap(b, b-k) {
			return int(k)
		}
	}
}

// A tick whose renewals Redis refused (out of memory) and whose liveness
// mark's reply was then lost (the connection cut after the renewal's
// reply) is an outage, told at once: the outcome is unanswered, with the
// refusal kept for the first renewal accepted to tell. Before, the
// renewals' refusal hid the lost reply: the tick read as a refusal, and
// the outage was told only by the next tick.
func TestARefusedRenewalWhoseLivenessReplyIsLostIsAnOutage(t *testing.T) {
	rs := testredis.Start(t)
	p := newBudgetProxy(t, rs.Addr)
	f, _, l := liveClusterEdge(t, oneProviderCfg(t, 1), rs, p.addr, time.Second)
	out := refusedTickLosingLiveness(t, f, rs, p, l)
	if out.last != renewUnanswered || !out.unanswered || !out.refused {
		t.Fatalf("renewal refused, liveness reply lost: %+v; want an outage (unanswered), the refusal kept", out)
	}
}

// refusedTickLosingLiveness runs one tick of f (edge e1 through p, on
// rs, holding l) whose renewals Redis refuses (out of memory) and whose
// liveness mark's reply p then throws away, and returns how it ended.
func refusedTickLosingLiveness(t *testing.T, f *fixture, rs *testredis.Server, p *budgetProxy, l *Lease) renewOutcome {
	t.Helper()
	ctx := context.Background()
	if again, _ := f.d.renewLeases(renewOutcome{}); !again.IsZero() { // loads the scripts
		t.Fatal("the renewal failed")
	}
	restore := rs.OutOfMemory(t)
	defer restore()
	// The renewal's refusal, as Redis words it, read by a ledger of its
	// own: its reply's bytes are what the proxy passes.
	probe := cluster.Open(cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 5 * time.Second, EdgeID: "e1"})
	defer probe.Close()
	_, err := probe.Renew(ctx, map[string][]cluster.HeldLease{cluster.Key("n", "p"): {{ID: l.ledgerID}}})
	var reply redis.Error
	if !errors.As(err, &reply) || !errors.Is(err, cluster.ErrRefused) {
		t.Fatalf("renewal out of memory: %v, want a refusal", err)
	}
	p.budget.Store(int64(len("-" + reply.Error() + "\r\n")))
	_, out := f.d.renewLeases(renewOutcome{})
	p.budget.Store(-1)
	return out
}
