package cli

import (
	"errors"
	"syscall"

	"go.uber.org/zap"
)

// Why a CLI's group ran without its guard (startGuard, Linux only): the
// stage that failed, matched with errors.Is.
var (
	// errNoGuardEntry: the running binary does not call RunGuardIfAsked.
	errNoGuardEntry = errors.New("cli: the running binary has no group guard entry (RunGuardIfAsked)")
	// errGuardPipe: the guard's pipe could not be made (out of
	// descriptors, usually).
	errGuardPipe = errors.New("cli: guard pipe")
	// errGuardStart: the guard process could not be started (out of
	// processes or memory, /proc not mounted).
	errGuardStart = errors.New("cli: start group guard")
)

// maxUnguardedCauses bounds the distinct causes warned of per instance;
// a cause past it is logged at debug, as a repeated one is.
const maxUnguardedCauses = 8

// unguardedCause is the class of a guard failure that is warned of once:
// the stage that failed (nil: none of the above) and the system's error
// number under it (0: none), so that a later, different failure (a pipe
// out of descriptors after a start that found no entry, an EAGAIN after an
// ENOMEM) is warned of too, while one failing every run alike is warned of
// once.
type unguardedCause struct {
	stage error
	errno syscall.Errno
}

func causeOf(err error) unguardedCause {
	var c unguardedCause
	for _, stage := range []error{errNoGuardEntry, errGuardPipe, errGuardStart} {
		if errors.Is(err, stage) {
			c.stage = stage
			break
		}
	}
	_ = errors.As(err, &c.errno)
	return c
}

// noteUnguarded warns that a CLI's process group ran without its guard
// (startGuard): its descendants would outlive a node killed while they
// ran. Each cause (unguardedCause) is warned of once per instance, up to
// maxUnguardedCauses; a repeat is logged at debug. nil is a no-op.
func (a *instance) noteUnguarded(err error) {
	if err == nil {
		return
	}
	c := causeOf(err)
	a.unguardedMu.Lock()
	_, seen := a.unguardedSeen[c]
	warn := !seen && len(a.unguardedSeen) < maxUnguardedCauses
	if warn {
		if a.unguardedSeen == nil {
			a.unguardedSeen = map[unguardedCause]struct{}{}
		}
		a.unguardedSeen[c] = struct{}{}
	}
	a.unguardedMu.Unlock()
	if warn {
		a.log.Warn("cli: a CLI's descendants would outlive the node if it were killed", zap.Error(err))
		return
	}
	a.log.Debug("cli: a CLI ran without its guard", zap.Error(err))
}
