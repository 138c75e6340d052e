package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
	"github.com/redis/go-redis/v9"
)

// cutProxy forwards loopback connections to a Redis. Armed by Cut(n), it
// passes the next n bytes Redis sends (on any connection) and holds the
// rest, both sockets open, until Release: a reply left half-read, as a
// stalled network or a Redis stopped mid-write leaves it.
type cutProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu   sync.Mutex
	cond *sync.Cond // on mu: budget, closed or busy changed
	// budget is how many more bytes from Redis pass before the rest is
	// held; negative: no hold. busy counts the chunks from Redis being
	// held or written. conns are the open sockets, both sides. closed is
	// set by close. All guarded by mu.
	budget int
	busy   int
	conns  []net.Conn
	closed bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, budget: -1}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	// Owner: the proxy (close waits for it). Stops when close closes the
	// listener.
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.wg.Add(2)
		p.mu.Unlock()
		// Owner: the proxy (close waits for both). Each stops when its
		// source or destination closes (the other pump closes both on
		// its way out, as does close).
		go p.pump(s, c, false)
		go p.pump(c, s, true)
	}
}

// pump copies src to dst; fromRedis pumps are held by the budget.
func (p *cutProxy) pump(dst, src net.Conn, fromRedis bool) {
	defer p.wg.Done()
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			k := len(data)
			if fromRedis {
				if k = p.pass(k); k == 0 {
					return
				}
			}
			_, werr := dst.Write(data[:k])
			if fromRedis {
				p.passed()
			}
			if werr != nil {
				return
			}
			data = data[k:]
		}
		if err != nil {
			return
		}
	}
}

// pass waits until some of n bytes from Redis may pass and reports how
// many (0: the proxy closed); passed must follow once they are written.
func (p *cutProxy) pass(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busy++
	p.cond.Broadcast()
	for p.budget == 0 && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		p.busy--
		p.cond.Broadcast()
		return 0
	}
	if p.budget > 0 {
		n = min(n, p.budget)
		p.budget -= n
	}
	return n
}

func (p *cutProxy) passed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busy--
	p.cond.Broadcast()
}

// cut arms the hold after n more bytes from Redis.
func (p *cutProxy) cut(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = n
}

// waitHeld waits until a chunk from Redis is held back.
func (p *cutProxy) waitHeld() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !(p.budget == 0 && p.busy > 0) {
		p.cond.Wait()
	}
}

// release lets what is held pass and waits until it was written (or its
// connection found closed).
func (p *cutProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = -1
	p.cond.Broadcast()
	for p.busy > 0 {
		p.cond.Wait()
	}
}

func (p *cutProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	conns := p.conns
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}

// openCutLedger is a ledger (edge "e", deadlineTimeout) on a fresh
// redis-server reached through a cutProxy, and a client of that server
// that does not go through the proxy.
func openCutLedger(t *testing.T) (*Ledger, *cutProxy, *redis.Client) {
	t.Helper()
	rs := testredis.Start(t)
	rdb := rs.Client(t)
	p := newCutProxy(t, rs.Addr)
	l := Open(Config{Address: p.addr(), TTL: time.Minute, Timeout: deadlineTimeout, EdgeID: "e"})
	t.Cleanup(func() { _ = l.Close() })
	return l, p, rdb
}

// A reply cut mid-way (the first bytes of Held's reply read, the rest
// held back) fails the call at its deadline, and its connection is not
// used again: once the rest of that reply has reached the client, the
// same ledger's next calls still read their own replies (a connection put
// back in the pool would hand the rest of that reply to the next call
// as its own).
func TestAReplyCutMidwayLeavesNoConnectionBehind(t *testing.T) {
	l, p, rdb := openCutLedger(t)
	ctx := context.Background()
	key := Key("n", "p")
	takeN(t, l, key, 1)
	p.cut(3) // "-NO" of the reply "-NOSCRIPT …" (the status script not loaded yet)
	start := time.Now()
	_, err := l.Held(ctx, []string{key})
	took := time.Since(start)
	if !errors.Is(err, ErrUnavailable) || took > deadlineTimeout+deadlineSlack {
		t.Fatalf("held with its reply cut: %v after %v; want %v within %v", err, took, ErrUnavailable, deadlineTimeout+deadlineSlack)
	}
	p.waitHeld()
	p.release()
	checkReplies(t, l, rdb, key)
}
