package nodewire

import (
	"bytes"
	"context"
	"errors"
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
		// Loopback TCP, half-closed once data is written: the edge reads
		// it, then the peer's end, at once. (Over net.Pipe a case took
		// seconds: the write waited for reads the edge never makes, and
		// the edge for a peer that never hung up, a handful of cases a
		// minute.)
		c, s := tcpPair(t)
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
		_ = c.(*net.TCPConn).CloseWrite()
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

// FuzzClientHandshake is FuzzServerHandshake from the node's side: whatever
// the far end of Dial answers the registration with (a broken edge, a
// wrong server, a man in the middle without TLS), Dial never panics,
// returns within its handshake timeout, and returns a connection only for
// an accepted RegisterResponse (a refusal only as *RejectedError with the
// edge's code); what follows the answer is read by the multiplexer, and
// closing the connection returns.
func FuzzClientHandshake(f *testing.F) {
	answer := func(resp *iop.RegisterResponse) []byte {
		b, err := AppendFrame(nil, &iop.Envelope{Body: &iop.Envelope_RegisterResponse{RegisterResponse: resp}}, 0)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	accept := answer(acceptResponse("n1", testHeartbeat))
	f.Add(accept)
	f.Add(append(append([]byte(nil), accept...), append(rawHeader(muxTypeData, flagSYN, 2, 3), "abc"...)...))
	f.Add(append(append([]byte(nil), accept...), rawHeader(muxTypeData, flagSYN, 1, 0)...)) // wrong parity
	f.Add(answer(rejectResponse(iop.RejectCode_REJECT_CODE_CREDENTIALS, "no")))
	f.Add(answer(&iop.RegisterResponse{}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
	f.Add(accept[:len(accept)-1])

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	const hsTimeout = time.Second
	f.Fuzz(func(t *testing.T, data []byte) {
		edgeDone := make(chan struct{})
		go func() { // Owner: the fuzz case; ends once the node hangs up.
			defer close(edgeDone)
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * hsTimeout))
			var p [len(preface)]byte
			if _, err := io.ReadFull(c, p[:]); err != nil {
				return
			}
			if _, err := ReadFrame(c, maxRegisterFrame); err != nil {
				return
			}
			_, _ = c.Write(data)
			_ = c.(*net.TCPConn).CloseWrite()
			_, _ = io.Copy(io.Discard, c)
		}()
		start := time.Now()
		cc, resp, err := Dial(context.Background(), DialConfig{Address: ln.Addr().String(), HandshakeTimeout: hsTimeout}, testRegisterRequest("n1"))
		if el := time.Since(start); el > hsTimeout+time.Second {
			t.Fatalf("Dial took %v with a %v handshake timeout", el, hsTimeout)
		}
		first, ferr := ReadFrame(bytes.NewReader(data), 0)
		want := first.GetRegisterResponse()
		if err == nil {
			if ferr != nil || want == nil || !want.GetAccepted() || !resp.GetAccepted() {
				t.Fatalf("Dial accepted %v for an answer %v (%v)", resp, first, ferr)
			}
			closed := make(chan struct{})
			go func() { _ = cc.Close(); close(closed) }() // Owner: the fuzz case.
			select {
			case <-closed:
			case <-time.After(2 * time.Second):
				t.Fatal("ClientConn.Close did not return")
			}
		} else {
			if cc != nil || resp != nil {
				t.Fatalf("Dial failed (%v) with a connection or a response", err)
			}
			var rej *RejectedError
			if errors.As(err, &rej) && (want == nil || want.GetAccepted() || rej.Code != want.GetRejectCode()) {
				t.Fatalf("Dial refused (%v) for an answer %v", err, first)
			}
			if ferr == nil && want != nil && !want.GetAccepted() && !errors.As(err, &rej) {
				t.Fatalf("a refusal %v came back as %v, not *RejectedError", want, err)
			}
		}
		select {
		case <-edgeDone:
		case <-time.After(2 * hsTimeout):
			t.Fatal("the node did not hang up")
		}
	})
}
