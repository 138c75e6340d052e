// Package faultproxy is a loopback TCP proxy for fault-injection tests: put
// between a node and the edge's node listener, it lets a test cut, kill or
// freeze that connection at will.
package faultproxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards every TCP connection accepted on its loopback listener to
// Target. It can cut live connections after a number of further bytes
// (landing anywhere, mid-frame included), kill them at once, or freeze them:
// while frozen, nothing is delivered in either direction — data, FIN or RST —
// yet both sockets stay open, which is what a stalled network looks like to
// each end.
type Proxy struct {
	target string
	ln     net.Listener
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	mu     sync.Mutex
	links  map[*link]struct{} // guarded by mu
	thaw   chan struct{}      // guarded by mu; closed while not frozen
	closed bool               // guarded by mu

	accepted atomic.Int64
	cut      atomic.Int64
}

// link is one proxied connection pair.
type link struct {
	client net.Conn
	// budget is how many more bytes (both directions together) may pass
	// before the link is cut; negative means unlimited.
	budget atomic.Int64
	done   chan struct{}

	mu     sync.Mutex
	server net.Conn // guarded by mu; nil until dialed
	closed bool     // guarded by mu
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.done)
	_ = l.client.Close()
	if l.server != nil {
		_ = l.server.Close()
	}
}

// setServer attaches the dialed target connection; false (and s closed)
// when the link was closed meanwhile.
func (l *link) setServer(s net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = s.Close()
		return false
	}
	l.server = s
	return true
}

// New listens on an ephemeral loopback port and forwards to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	thaw := make(chan struct{})
	close(thaw)
	p := &Proxy{target: target, ln: ln, done: make(chan struct{}), links: map[*link]struct{}{}, thaw: thaw}
	p.wg.Add(1)
	// Owner: the Proxy. Stops when Close closes the listener.
	go p.accept()
	return p, nil
}

// Addr is the address nodes should dial instead of Target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stats reports how many connections were accepted and how many were cut by
// a byte budget (CutAfter) or KillAll.
func (p *Proxy) Stats() (accepted, cut int64) { return p.accepted.Load(), p.cut.Load() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		p.accepted.Add(1)
		l := &link{client: c, done: make(chan struct{})}
		l.budget.Store(-1)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		// Owner: the Proxy. Stops when either side of the link ends, the
		// link is cut, or Close closes it.
		go p.serve(l)
	}
}

// serve dials the target and pumps both directions until the link ends.
func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
		l.close()
	}()
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !l.setServer(s) { // closed (KillAll, Close) while dialing
		return
	}
	var pipes sync.WaitGroup
	pipes.Add(1)
	// Owner: serve, which waits for it. Stops when the link closes (its
	// sockets are closed, so the pending Read fails).
	go func() { defer pipes.Done(); p.pipe(l, s, l.client) }()
	p.pipe(l, l.client, s)
	pipes.Wait()
}

// pipe copies src to dst. Every read (data or error) waits for the proxy to
// be thawed before it has any effect, so a frozen proxy delivers neither
// bytes nor closes. On any end of the copy the whole link closes: iop's
// wire never half-closes TCP, so nothing is lost by closing both ways.
func (p *Proxy) pipe(l *link, dst, src net.Conn) {
	defer l.close()
	buf := make([]byte, 16<<10)
	for {
		n, rerr := src.Read(buf)
		if !p.waitThaw(l) {
			return
		}
		if n > 0 {
			take, cut := l.take(n)
			if take > 0 {
				if _, err := dst.Write(buf[:take]); err != nil {
					return
				}
			}
			if cut {
				p.cut.Add(1)
				return
			}
		}
		if rerr != nil {
			return
		}
	}
}

// take reserves up to n bytes of the link's budget: how many may be written
// and whether the link must be cut after them.
func (l *link) take(n int) (int, bool) {
	for {
		b := l.budget.Load()
		if b < 0 {
			return n, false
		}
		t := int64(n)
		if t > b {
			t = b
		}
		if l.budget.CompareAndSwap(b, b-t) {
			return int(t), b-t == 0
		}
	}
}

// waitThaw blocks while the proxy is frozen. It reports false when the link
// or the proxy closed meanwhile.
func (p *Proxy) waitThaw(l *link) bool {
	p.mu.Lock()
	thaw := p.thaw
	p.mu.Unlock()
	select {
	case <-thaw:
		return true
	case <-l.done:
		return false
	case <-p.done:
		return false
	}
}

// CutAfter arms every live connection to be cut after n more bytes (both
// directions counted together); n = 0 cuts each at its next byte. It returns
// how many connections were armed. New connections are not affected.
func (p *Proxy) CutAfter(n int64) int {
	if n < 0 {
		n = 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.links {
		l.budget.Store(n)
	}
	return len(p.links)
}

// KillAll closes every live connection now and reports how many.
func (p *Proxy) KillAll() int {
	p.mu.Lock()
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
	p.cut.Add(int64(len(ls)))
	return len(ls)
}

// Freeze stops all delivery in both directions on every connection, current
// and future, until Unfreeze. Idempotent.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thaw:
		p.thaw = make(chan struct{})
	default: // already frozen
	}
}

// Unfreeze resumes delivery: what was held back flows (or fails) as usual.
// Idempotent.
func (p *Proxy) Unfreeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thaw:
	default:
		close(p.thaw)
	}
}

// Close stops accepting, closes every connection and waits for all of the
// proxy's goroutines. Idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.closed = true
	close(p.done)
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, l := range ls {
		l.close()
	}
	p.wg.Wait()
}
