//go:build !unix

package h1client

import "errors"

// pushSupported is false: WriteTo reads through Read (readLoop is never
// called).
const pushSupported = false

func (ps *pusher) readLoop() error {
	return errors.New("h1client: no socket access on this platform")
}
