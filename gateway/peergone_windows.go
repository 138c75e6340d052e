//go:build windows

package gateway

// peerGoneErrnos are the socket errors, besides EPIPE and ECONNRESET,
// that mean the client's connection was reset or aborted (clientLeft).
var peerGoneErrnos = windowsPeerGone
