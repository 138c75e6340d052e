//go:build !windows

package gateway

import "syscall"

// peerGoneErrnos are the socket errors, besides EPIPE and ECONNRESET,
// that mean the client's connection was reset or aborted (clientLeft):
// none here, where sockets report exactly those two.
var peerGoneErrnos []syscall.Errno
