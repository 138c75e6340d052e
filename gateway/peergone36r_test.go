package gateway

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

// A request body's read that Windows failed with WSAECONNRESET or
// WSAECONNABORTED is the client going away (clientGone there), as its
// write is (clientLeft); WSAETIMEDOUT is not. Tested on every platform:
// elsewhere peerGoneErrnos is empty, so the platform's own check cannot
// see a Windows errno dropped from clientGone.
func TestWindowsResetReadIsClientGone36r(t *testing.T) {
	wsa := func(e syscall.Errno) error {
		return fmt.Errorf("gateway: body: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("wsarecv", e)})
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{wsa(10054), true},
		{wsa(10053), true},
		{wsa(10060), false},
		{wsa(syscall.ECONNRESET), true},
	} {
		if got := clientGoneOn(c.err, windowsPeerGone); got != c.want {
			t.Errorf("on Windows, clientGone(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
