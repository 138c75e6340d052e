//go:build iopnode_testhooks

package main

import (
	"fmt"
	"os"
)

// holdFinalStopEnv, set in a test build's environment, holds the drain's
// goroutine after the cut until a signal waits on late, then lets the
// final stop begin with it still waiting: a signal sent in the moment
// between the cut and the final stop, every time.
const holdFinalStopEnv = "IOP_NODE_TEST_HOLD_FINAL_STOP"

func init() {
	if os.Getenv(holdFinalStopEnv) == "" {
		return
	}
	beforeFinalStop = func(late chan os.Signal) {
		fmt.Fprintln(os.Stderr, "test hook: final stop held until a signal waits")
		sig := <-late
		select {
		case late <- sig: // back where nothing reads it any more
		default: // another came meanwhile and waits in its place
		}
	}
}
