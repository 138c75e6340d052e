package nodewire

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// rawEdge is an edge played by the test on a loopback listener: it writes
// exact bytes, so a node can be shown a broken or hostile edge.
type rawEdge struct {
	ln    net.Listener
	conns chan net.Conn
	// wrap, when set before the first dial, is applied to each accepted
	// connection (a TLS server).
	wrap func(net.Conn) net.Conn
}

// startRawEdge listens on 127.0.0.1:0; every accepted connection is handed
// to accept. Cleanup closes the listener and every connection accepted.
func startRawEdge(t *testing.T) *rawEdge {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &rawEdge{ln: ln, conns: make(chan net.Conn, 16)}
	var accepted []net.Conn
	done := make(chan struct{})
	// Owner: the test; stops when Cleanup closes ln.
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted = append(accepted, c)
			if e.wrap != nil {
				c = e.wrap(c)
			}
			select {
			case e.conns <- c:
			default:
				_ = c.Close()
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range accepted {
			_ = c.Close()
		}
	})
	return e
}

func (e *rawEdge) addr() string { return e.ln.Addr().String() }

// accept returns the next connection a node dialed.
func (e *rawEdge) accept(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-e.conns:
		return c
	case <-time.After(waitLong):
		t.Fatal("no node dialed the raw edge")
		return nil
	}
}

// readHello reads a node's preface and RegisterRequest frame from c.
func readHello(t *testing.T, c net.Conn) *iop.RegisterRequest {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(waitLong))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var p [len(preface)]byte
	if _, err := io.ReadFull(c, p[:]); err != nil || p != preface {
		t.Fatalf("preface %q, %v", p, err)
	}
	env, err := ReadFrame(c, maxRegisterFrame)
	if err != nil || env.GetRegisterRequest() == nil {
		t.Fatalf("register request: %v, %v", env, err)
	}
	return env.GetRegisterRequest()
}

// writeMuxEnvelope writes env as the payload of one data frame of stream
// id with flags.
func writeMuxEnvelope(t *testing.T, c net.Conn, flags uint16, id uint32, env *iop.Envelope) {
	t.Helper()
	frame, err := AppendFrame(nil, env, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(append(rawHeader(muxTypeData, flags, id, uint32(len(frame))), frame...)); err != nil {
		t.Fatalf("edge write: %v", err)
	}
}

// edgeReady plays the edge's side of the ready exchange on c, after the
// RegisterResponse: it reads the node's control stream open (stream 1,
// carrying a NodeReadyRequest) and answers ready.
func edgeReady(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(waitLong))
	f := readRawFrame(t, c)
	_ = c.SetReadDeadline(time.Time{})
	if f.typ != muxTypeData || f.flags&flagSYN == 0 || f.id != 1 {
		t.Fatalf("node's first mux frame: type %d flags %d id %d, want the control stream's open", f.typ, f.flags, f.id)
	}
	env, err := DecodeEnvelope(f.payload[frameHeaderLen:])
	if err != nil || env.GetNodeReadyRequest() == nil {
		t.Fatalf("ready request: %v, %v", env, err)
	}
	writeMuxEnvelope(t, c, 0, 1, &iop.Envelope{Body: &iop.Envelope_NodeReadyResponse{NodeReadyResponse: &iop.NodeReadyResponse{Ready: true}}})
}

// rawEdgeReady dials e with cfg (its Address set to e's), registers with
// an accepting response carrying hb, and completes the ready exchange.
// It returns the node's connection and the edge's socket.
func rawEdgeReady(t *testing.T, e *rawEdge, cfg DialConfig, hb *iop.HeartbeatConfig) (*ClientConn, net.Conn) {
	t.Helper()
	cfg.Address = e.addr()
	type dialed struct {
		cc  *ClientConn
		err error
	}
	res := make(chan dialed, 1)
	// Owner: the test; Dial is bounded by the handshake timeout.
	go func() {
		cc, _, err := Dial(t.Context(), cfg, testRegisterRequest("node-1"))
		res <- dialed{cc, err}
	}()
	c := e.accept(t)
	readHello(t, c)
	if err := WriteFrame(c, &iop.Envelope{Body: &iop.Envelope_RegisterResponse{RegisterResponse: acceptResponse("node-1", hb)}}, 0); err != nil {
		t.Fatal(err)
	}
	d := await(t, res, "Dial to return")
	if d.err != nil {
		t.Fatalf("Dial: %v", d.err)
	}
	t.Cleanup(func() { _ = d.cc.Close() })
	readyErr := make(chan error, 1)
	// Owner: the test; Ready is bounded by the handshake timeout.
	go func() { readyErr <- d.cc.Ready(t.Context(), "node-1") }()
	edgeReady(t, c)
	if err := <-readyErr; err != nil {
		t.Fatalf("Ready: %v", err)
	}
	return d.cc, c
}

// edgeResets reads the node's frames from c until it ends and reports the
// id of every stream the node resets; heartbeats and other frames are
// skipped. The channel closes when c does.
func edgeResets(c net.Conn) <-chan uint32 {
	ids := make(chan uint32, 1024)
	// Owner: the caller; stops when c is closed or the node hangs up.
	go func() {
		defer close(ids)
		br := bufio.NewReader(c)
		var hdr [muxHeaderLen]byte
		for {
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				return
			}
			flags, id := binary.BigEndian.Uint16(hdr[2:4]), binary.BigEndian.Uint32(hdr[4:8])
			if hdr[1] == muxTypeData {
				if _, err := br.Discard(int(binary.BigEndian.Uint32(hdr[8:12]))); err != nil {
					return
				}
				if flags&flagRST != 0 {
					ids <- id
				}
			}
		}
	}()
	return ids
}

// expectResets waits for the node to reset exactly the streams want (in
// any order), and no other within a short while after.
func expectResets(t *testing.T, resets <-chan uint32, want ...uint32) {
	t.Helper()
	left := map[uint32]bool{}
	for _, id := range want {
		left[id] = true
	}
	timeout := time.After(waitLong)
	for len(left) > 0 {
		select {
		case id := <-resets:
			if !left[id] {
				t.Fatalf("node reset stream %d; want resets of %v", id, want)
			}
			delete(left, id)
		case <-timeout:
			t.Fatalf("node did not reset streams %v within %v", left, waitLong)
		}
	}
	select {
	case id := <-resets:
		t.Fatalf("node reset stream %d too; want resets of %v only", id, want)
	case <-time.After(100 * time.Millisecond):
	}
}
