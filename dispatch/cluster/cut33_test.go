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

// waitHeld waits until a chunk from Redis is held back, and fails the
// test if none is within cutWait (nothing came from Redis to hold).
func (p *cutProxy) waitHeld(t *testing.T) {
	t.Helper()
	late := false
	// A timer, not a wait of the peer's making: it wakes the wait below
	// once cutWait has passed, whatever Redis and the client do.
	timer := time.AfterFunc(cutWait, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		late = true
		p.cond.Broadcast()
	})
	defer timer.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for !(p.budget == 0 && p.busy > 0) {
		if late {
			t.Fatalf("no reply from Redis held back by the cut within %v", cutWait)
		}
		p.cond.Wait()
	}
}

// release lets what is held pass and waits until it was written (or its
// connection found closed). The wait does not depend on the client: what
// is held is the rest of one reply, a few bytes the socket buffers take
// whether the client reads or not, and a write to a closed socket fails
// at once.
func (p *cutProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = -1
	p.cond.Broadcast()
	for p.busy > 0 {
		p.cond.Wait()
	}
}

const (
	// cutHold is how long after a cut call began the rest of its reply
	// passes if the call has not returned by then: 2 s past the ledger's
	// deadline (deadlineTimeout), so that a timer the runtime fires late
	// on a loaded machine still cuts the read before the rest arrives,
	// while a call whose read had no deadline (or a later one) gets its
	// whole reply and succeeds, which the tests refuse whatever the time.
	cutHold = deadlineTimeout + 2*time.Second
	// cutWait bounds the tests' waits on the proxy (a chunk held back,
	// the rest of a reply passed), each of which takes milliseconds; past
	// it the test fails naming the wait instead of hanging to go test's
	// timeout.
	cutWait = 10 * time.Second
)

// callCut runs call with the proxy cut after n more bytes from Redis.
// The rest passes once call has returned (the tests then check that the
// late bytes reach no other call), or cutHold after it began if it has
// not; callCut returns when they have passed, and fails the test if call
// returned only after they did: its read waited past its deadline for
// them (a read without the call's deadline; a late reply then read makes
// no error of its own, the resend it calls for finding the deadline
// passed, so that the order, not the error, tells it).
func (p *cutProxy) callCut(t *testing.T, n int, call func()) {
	t.Helper()
	p.cut(n)
	passed := make(chan struct{})
	// Owner: callCut, which waits for it (or stops it) below. Stops when
	// release has returned.
	timer := time.AfterFunc(cutHold, func() { p.release(); close(passed) })
	call()
	if timer.Stop() { // call returned first: the rest is still held
		p.waitHeld(t)
		p.release()
		return
	}
	select {
	case <-passed:
	case <-time.After(cutWait):
		t.Fatalf("the rest of the cut reply not passed within %v", cutWait)
	}
	t.Fatalf("the call returned only once the rest of its cut reply had passed, %v after it began: its read waited past the %v deadline", cutHold, deadlineTimeout)
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
// as its own). The rest passes cutHold after the call began, 2 s past
// the deadline, if the call still waits for it (callCut fails the test):
// a read with no deadline of the call's (go-redis without
// ContextTimeoutEnabled and without ReadTimeout) waited for it.
func TestAReplyCutMidwayLeavesNoConnectionBehind(t *testing.T) {
	l, p, rdb := openCutLedger(t)
	ctx := context.Background()
	key := Key("n", "p")
	takeN(t, l, key, 1)
	var err error
	var took time.Duration
	// "-NO" of the reply "-NOSCRIPT …" (the status script not loaded yet)
	p.callCut(t, 3, func() {
		start := time.Now()
		_, err = l.Held(ctx, []string{key})
		took = time.Since(start)
	})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("held with its reply cut: %v after %v; want %v at the %v deadline", err, took, ErrUnavailable, deadlineTimeout)
	}
	checkReplies(t, l, rdb, key)
}
