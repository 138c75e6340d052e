package edgeapp

import (
	"net"
	"sync"
)

// limitListener accepts at most n connections at a time: beyond that,
// Accept waits for one to close, and new connections wait in the kernel's
// backlog instead of costing descriptors and goroutines here.
//
// It is golang.org/x/net/netutil.LimitListener except that accepted TCP
// connections keep their CloseWrite method: net/http half-closes a
// connection it answers and then closes (an early 401/413, a 431) so that
// the client reads the answer before the reset that closing a socket with
// unread data causes. netutil's wrapper hides CloseWrite.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	release := func() { <-l.sem }
	if tc, ok := c.(*net.TCPConn); ok {
		return &limitTCPConn{TCPConn: tc, release: release}, nil
	}
	return &limitConn{Conn: c, release: release}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitTCPConn is an accepted TCP connection holding a slot until closed;
// every *net.TCPConn method (CloseWrite among them) stays available.
type limitTCPConn struct {
	*net.TCPConn
	once    sync.Once
	release func()
}

func (c *limitTCPConn) Close() error {
	err := c.TCPConn.Close()
	c.once.Do(c.release)
	return err
}

// limitConn is limitTCPConn for any other connection type.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
