//go:build !linux

package mockup

import (
	"errors"
	"net"
)

// rawFD reports no descriptor: streams use blocking writes (blockingStream).
func rawFD(net.Conn) (int, bool) { return 0, false }

func writeFD(int, []byte) (int, error) {
	return 0, errors.New("mockup: no raw writes on this platform")
}

// yieldCPU: the Go scheduler's yield is all there is here.
func yieldCPU() {}
