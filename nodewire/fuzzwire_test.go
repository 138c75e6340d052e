package nodewire

import (
	"io"
	"net"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// FuzzMuxClientSession is FuzzMuxSession in the other direction: what a
// hostile edge may send a node's session. The session never panics, never
// buffers beyond a stream's window, and ends when its peer hangs up.
func FuzzMuxClientSession(f *testing.F) {
	open := append(rawHeader(muxTypeData, flagSYN, 2, 3), "abc"...)
	f.Add(open)
	f.Add(append(append([]byte{}, open...), rawHeader(muxTypeData, flagFIN, 2, 0)...))
	f.Add(append(append([]byte{}, open...), rawHeader(muxTypeData, flagRST, 2, 0)...))
	f.Add(append(append([]byte{}, open...), rawHeader(muxTypeWindow, 0, 1, 4096)...))
	f.Add(rawHeader(muxTypeData, flagSYN, 1, 0)) // wrong parity for an edge
	f.Add(rawHeader(muxTypeWindow, 0, 1, 1<<31))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzSession(t, func(c net.Conn) *muxSession {
			node := muxClient(c)
			// The node's control stream exists, as after a handshake.
			ctrl, _ := node.OpenStream()
			_ = ctrl.SetWriteDeadline(time.Now().Add(time.Second))
			go func() { _, _ = ctrl.Write([]byte("hello")) }() // Owner: the fuzz case; ends with the session.
			return node
		}, data)
	})
}

// FuzzServerHandshake feeds the edge's listener whatever an unauthenticated
// peer may send: the edge never panics, never registers anything but a
// well-formed request, reads at most the bounded preface and frame, and
// always hangs up.
func FuzzServerHandshake(f *testing.F) {
	good, _ := AppendFrame(append([]byte(nil), preface[:]...), &iop.Envelope{Body: &iop.Envelope_RegisterRequest{RegisterRequest: testRegisterRequest("n1")}}, maxRegisterFrame)
	f.Add(good)
	f.Add(preface[:])
	f.Add(append(append([]byte(nil), preface[:]...), 0xff, 0xff, 0xff, 0xff))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(append(append([]byte(nil), preface[:7]...), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newFakeHandler()
		h.register = func(_ *Conn, req *iop.RegisterRequest) *iop.RegisterResponse {
			return rejectResponse(iop.RejectCode_REJECT_CODE_UNAVAILABLE, "fuzz")
		}
		srv := NewServer(ServerConfig{Handler: h, HandshakeTimeout: time.Second})
		c, s := net.Pipe()
		counted := &countingConn{Conn: s}
		srv.wg.Add(1)
		done := make(chan struct{})
		go func() { // Owner: the fuzz case; ends when the handshake does.
			defer close(done)
			defer srv.wg.Done()
			srv.serveConn(counted, "fuzz")
		}()
		go func() { // Owner: the fuzz case; ends when c closes.
			_, _ = io.Copy(io.Discard, c)
		}()
		_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Write(data)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the handshake did not end")
		}
		_ = c.Close()
		_ = srv.Close()
		if got, limit := counted.read.Load(), int64(len(preface)+frameHeaderLen+maxRegisterFrame)+maxRegisterFrame; got > limit {
			t.Fatalf("read %d bytes from an unauthenticated peer (bound %d)", got, limit)
		}
	})
}
