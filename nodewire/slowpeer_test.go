package nodewire

import (
	"net"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcert"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A peer that drips a valid hello a byte at a time, each byte well inside
// any per-read timeout, is still closed at the handshake deadline: the
// deadline covers the whole handshake, not each read. The same for a TLS
// listener, where the drip is the ClientHello's.
func TestDrippingHelloClosedAtHandshakeDeadline(t *testing.T) {
	const hsTimeout = 300 * time.Millisecond
	hello, err := AppendFrame(preface[:], &iop.Envelope{Body: &iop.Envelope_RegisterRequest{RegisterRequest: testRegisterRequest("n1")}}, maxRegisterFrame)
	if err != nil {
		t.Fatal(err)
	}
	// The start of a TLS record holding a 508-byte ClientHello.
	clientHello := append([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc}, make([]byte, 508)...)
	for _, tc := range []struct {
		name string
		tls  bool
		drip []byte
	}{{"plain", false, hello}, {"tls", true, clientHello}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ServerConfig{HandshakeTimeout: hsTimeout}
			if tc.tls {
				ca := testcert.NewCA(t, t.TempDir(), "edge")
				certFile, keyFile := ca.Issue(t, "edge", true)
				cfg.TLS = serverTLS(t, certFile, keyFile, "")
			}
			h := newFakeHandler()
			ts := startServer(t, h, cfg)
			raw, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			stop := make(chan struct{})
			dripped := make(chan struct{})
			// Owner: the test; ends at stop or when a write fails.
			go func() {
				defer close(dripped)
				for _, b := range tc.drip[:len(tc.drip)-1] {
					select {
					case <-stop:
						return
					case <-time.After(hsTimeout / 10):
					}
					if _, err := raw.Write([]byte{b}); err != nil {
						return
					}
				}
			}()
			start := time.Now()
			expectClosedByPeer(t, raw, waitLong)
			close(stop)
			<-dripped
			if el := time.Since(start); el < hsTimeout*3/4 {
				t.Fatalf("closed after %v, before the %v handshake deadline", el, hsTimeout)
			}
			ts.close(t)
			if regs, _, _ := h.counts(); regs != 0 {
				t.Fatalf("%d registrations from a peer that never finished its hello", regs)
			}
		})
	}
}
