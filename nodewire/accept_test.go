package nodewire

import (
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// flakyListener fails its first n Accepts with err, then accepts.
type flakyListener struct {
	net.Listener
	failures atomic.Int32
	err      error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.failures.Add(-1) >= 0 {
		return nil, l.err
	}
	return l.Listener.Accept()
}

// Running out of descriptors, or a connection aborted before it was
// accepted, does not end Serve: it backs off and accepts again.
func TestServeSurvivesTemporaryAcceptErrors(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED} {
		t.Run(errno.Error(), func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := &flakyListener{Listener: inner, err: &net.OpError{Op: "accept", Net: "tcp", Err: errno}}
			ln.failures.Store(5)
			srv := NewServer(ServerConfig{Handler: newFakeHandler(), HandshakeTimeout: time.Second})
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			c, err := net.Dial("tcp", inner.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The server got past the errors: it reads the connection and
			// drops it for a wrong preface.
			_, _ = c.Write([]byte("NOTIOP!!"))
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatal("read data from a server that should have dropped a bad preface")
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the server never served the connection after accept errors")
			}
			select {
			case err := <-done:
				t.Fatalf("Serve returned %v on a temporary accept error", err)
			default:
			}
			_ = srv.Close()
			if err := <-done; err != nil {
				t.Fatalf("Serve after Close: %v", err)
			}
		})
	}
}
