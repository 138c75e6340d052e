package dispatch

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// readdMarker is text of readd.lua, which a pipeline sends whole (EVAL).
var readdMarker = []byte("Puts back a lease its edge still")

// readdHolder is a loopback proxy in front of a redis-server that holds
// back the first connection whose commands carry the re-add script: what
// its client sent is kept (the client times out and closes it) until the
// test releases it, and then reaches Redis, as a command held in a socket
// buffer or a slow network does. Every other connection passes through.
type readdHolder struct {
	addr     string
	held     chan struct{} // closed once a connection is held
	release  chan struct{} // closed by the test (or cleanup) to let it through
	answered chan struct{} // closed once Redis answered the held commands

	claim, releaseOnce, answerOnce sync.Once
}

func newReaddHolder(t *testing.T, target string) *readdHolder {
	t.Helper()
	p := &readdHolder{held: make(chan struct{}), release: make(chan struct{}), answered: make(chan struct{})}
	ln := listenProxy(t, target, p.serve)
	p.addr = ln.Addr().String()
	t.Cleanup(func() {
		_ = ln.Close()
		p.letThrough()
	})
	return p
}

// letThrough releases the held connection. Idempotent.
func (p *readdHolder) letThrough() { p.releaseOnce.Do(func() { close(p.release) }) }

// serve copies between client c and Redis s.
func (p *readdHolder) serve(c, s net.Conn) {
	var holding bool // set by the client side before it stops forwarding
	var mu sync.Mutex
	// Owner: the proxy. Stops when the client closes (a held connection:
	// once its commands were answered, or 10 s after their release).
	go func() {
		buf := make([]byte, 32<<10)
		var tail, pending []byte
		for {
			n, err := c.Read(buf)
			if n > 0 {
				chunk := buf[:n]
				mu.Lock()
				if !holding && bytes.Contains(append(tail, chunk...), readdMarker) {
					p.claim.Do(func() { holding = true; close(p.held) })
				}
				h := holding
				mu.Unlock()
				if h {
					pending = append(pending, chunk...)
				} else if _, werr := s.Write(chunk); werr != nil {
					break
				}
				tail = append(tail[:0], chunk[max(0, n-len(readdMarker)):]...)
			}
			if err != nil {
				break
			}
		}
		_ = c.Close()
		if pending != nil {
			<-p.release
			if _, err := s.Write(pending); err == nil {
				select {
				case <-p.answered:
				case <-time.After(10 * time.Second):
				}
			}
		}
		_ = s.Close()
	}()
	// Owner: the proxy. Stops when Redis's side closes.
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				mu.Lock()
				h := holding
				mu.Unlock()
				if h {
					p.answerOnce.Do(func() { close(p.answered) })
				}
				_, _ = c.Write(buf[:n]) // a held client is gone: the answer is dropped
			}
			if err != nil {
				break
			}
		}
		_ = c.Close()
	}()
}

// A re-add whose batch timed out on the edge but ran in Redis after the
// lease's return (it was held on its way) does not put the returned lease
// back: the return, sent after a re-add the edge is unsure of, marks the
// lease returned, and the re-add script refuses it. The old code let the
// late re-add take the slot again, held by nobody, for the lease TTL (a
// minute here): every edge counted the provider one lease fuller.
func TestClusterLateReaddAfterReturnHoldsNoSlot(t *testing.T) {
	rs := testredis.Start(t)
	p := newReaddHolder(t, rs.Addr)
	f := closedLedgerFixture(t, oneProviderCfg(t, 1),
		cluster.Config{Address: p.addr, TTL: time.Minute, Timeout: time.Second, EdgeID: "e1"}, Options{})
	f.up("n")
	l := mustAcquire(t, f.d, Request{Model: "m"})
	key := cluster.Key("n", "p")
	ctx := context.Background()
	rdb := rs.Client(t)
	// The ledger lost the lease (it expired during an outage): the
	// renewal's finding, handed to readd as renewLeases does.
	p.loseAndReadd(t, f, rdb, key, l)
	// The returner waits out the re-add's timeout, then sends the return
	// on another connection: it reaches Redis first.
	l.Release(ReasonCompleted)
	p.returnThenReadd(t, rdb, l.ledgerID)
	if inLedger(t, rdb, key, l.ledgerID) {
		t.Fatalf("the returned lease is back in the ledger after its late re-add (ledger: %v)", rdb.ZRangeWithScores(ctx, key, 0, -1).Val())
	}
}

// returnThenReadd waits for the fenced return of lease id to have run in
// Redis (its mark is written; the lease is gone from the ledger already,
// so the return removes nothing and is not announced), then lets the held
// re-add through and waits for Redis's answer to it.
func (p *readdHolder) returnThenReadd(t *testing.T, rdb *redis.Client, id string) {
	t.Helper()
	waitFor(t, "the lease's fenced return", func() bool {
		return rdb.Exists(context.Background(), "iop:returned:"+id).Val() == 1
	})
	p.letThrough()
	select {
	case <-p.answered:
	case <-time.After(waitDeadline):
		t.Fatal("Redis never answered the late re-add")
	}
}

// loseAndReadd removes l from the ledger's key (as an outage's expiry
// would), hands it to readd as renewLeases does, and waits until the
// re-add's bytes are held.
func (p *readdHolder) loseAndReadd(t *testing.T, f *fixture, rdb *redis.Client, key string, l *Lease) {
	t.Helper()
	ctx := context.Background()
	if err := rdb.ZRem(ctx, key, l.ledgerID).Err(); err != nil {
		t.Fatal(err)
	}
	f.d.readd(map[string][]string{key: {l.ledgerID}}, map[string]*Lease{l.ledgerID: l})
	select {
	case <-p.held:
	case <-time.After(waitDeadline):
		t.Fatal("the re-add never reached the proxy")
	}
}

// freedSubscriber is a client of the Redis at addr and its subscription to
// the ledger's return announcements, active when it returns; both closed
// at the test's end.
func freedSubscriber(t *testing.T, addr string) (*redis.Client, *redis.PubSub) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	sub := rdb.Subscribe(context.Background(), cluster.FreedChannel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rdb, sub
}
