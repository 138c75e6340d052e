package nodewire

import (
	"errors"
	"testing"
)

// A frame whose length is over the limit leaves the stream's frames
// impossible to tell apart: every later Recv fails the same way, never
// reading the oversized payload's bytes as a length and a frame (here
// they are a whole, valid frame).
func TestRecvAfterOversizeFrameKeepsFailing(t *testing.T) {
	c, s := tcpPair(t)
	client, server := muxClient(c), muxServer(s)
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })

	inner := bodyFrame(t, 7, []byte("data: hidden\n\n"))
	var b []byte
	b = append(b, byte(len(inner)>>24), byte(len(inner)>>16), byte(len(inner)>>8), byte(len(inner)))
	b = append(b, inner...)
	for _, lent := range []bool{false, true} {
		st := newStream(openWith(t, client, server, b), len(inner)-1)
		for i := range 2 {
			recv := st.Recv
			if lent {
				recv = st.RecvLent
			}
			if env, err := recv(); !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("lent %v, receive %d: got (%v, %v), want ErrFrameTooLarge", lent, i, env, err)
			}
		}
	}
}
