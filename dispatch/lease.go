package dispatch

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// ReleaseReason is why a lease returned (the reason label of
// iop_lease_released_total).
type ReleaseReason string

// Release reasons.
const (
	ReasonCompleted ReleaseReason = "completed"
	ReasonCancelled ReleaseReason = "cancelled"
	ReasonError     ReleaseReason = "error"
	ReasonNodeLost  ReleaseReason = "node_lost"
)

// Lease is a slot on one (node, provider) resource. It is released exactly
// once: by its holder (Release) or by the registry when the node's
// generation is fenced, whichever comes first.
type Lease struct {
	d    *Dispatcher
	res  *resource
	gen  uint64
	conn *nodewire.Conn

	// What the holder needs to address the provider. The external model
	// name (Model) is for the HTTP surface and logs; it never goes on the
	// wire.
	NodeID       string
	ProviderID   string
	ProviderType string
	Category     string
	// MaxAttempts is the model's max_attempts (failover, see
	// config.ModelSpec).
	MaxAttempts int
	// ledgerID is the lease's id in the cluster ledger ("" without one).
	ledgerID   string
	Target     string
	Model      string
	Workspace  string
	SessionID  string
	AcquiredAt time.Time
	// CancelGrace is how long a cancelled exchange on this lease waits for
	// the node's terminal message (sent once the node has stopped the run
	// and freed its capacity slot) before the lease returns anyway: longer
	// than the time the provider's adapter may take to stop a run, so the
	// next waiter handed the slot is not refused by the node's gate.
	CancelGrace time.Duration

	// The small fields come last, together, so that a Lease, held for as
	// long as its request, fits 256 B (a size class): spread among the
	// others, their padding made it 280 B, in the 288 B class.
	Long bool
	// Tunnel: the provider is reached through the tunnel (as its adapter
	// declared); otherwise only normalized runs reach it.
	Tunnel   bool
	released bool          // guarded by d.mu
	reason   ReleaseReason // guarded by d.mu
	ToolMode iop.ToolMode

	// settled is the reason the lease returns with if its node is fenced
	// before the holder's Release (an index into settledReasons, plus
	// one; 0: not settled). The node's work ended with the exchange's
	// terminal: a draining node may stop and drop its session at once,
	// and the fence can then run before the holder's Release. It returns
	// the lease with this reason, not node_lost: the work was done.
	//
	// It is recorded twice: provisionally when the edge reads the
	// terminal (Stream.RecvBy, Stream.Drain: completed for a clean end,
	// cancelled for a cancellation, error for an error terminal), and
	// then with the holder's own reason by Stream.Finish, just before it
	// closes the stream. So no fence from the terminal's arrival on says
	// node_lost. Atomic rather than under d.mu, and an index rather than
	// a pointer, so that recording it allocates nothing: it runs once
	// per request.
	settled atomic.Uint32
	// exch is the lease's latest exchange (nil before the first opens):
	// a fence that finds nothing settled looks at what its stream holds
	// unread (exchange.queuedTerminal). Atomic so that recording it costs
	// the request path no lock.
	exch atomic.Pointer[exchange]
}

// settledReasons are the reasons Lease.settled can hold; its values are
// the settled* indices.
var settledReasons = [...]ReleaseReason{ReasonCompleted, ReasonCancelled, ReasonError}

// Lease.settled values.
const (
	settledNone uint32 = iota
	settledCompleted
	settledCancelled
	settledError
)

// settle records reason as the one the holder is about to release with
// (Lease.settled); a reason outside settledReasons records nothing.
func (l *Lease) settle(reason ReleaseReason) {
	for i, r := range settledReasons {
		if r == reason {
			l.settled.Store(uint32(i + 1))
			return
		}
	}
}

// fenceReason is the reason a fence returns the lease with: the one
// recorded once the exchange ended (Lease.settled); else the reason of a
// terminal that has arrived but that the holder has not read yet (the
// node answered whole before it went; the holder, still relaying what
// came before it, will end the request as that terminal says); else
// node_lost. d.mu is held: looking at the queue never waits (see
// exchange.queuedTerminal, which decodes up to walk of its frames from
// the first) and runs only at a fence, never per frame.
func (l *Lease) fenceReason(walk int) ReleaseReason {
	i := l.settled.Load()
	if i == settledNone {
		if x := l.exch.Load(); x != nil {
			// Recorded as the holder's read of it would: releaseLocked
			// then takes an error terminal for the node's own answer.
			if i = x.queuedTerminal(walk); i > settledNone {
				l.settled.CompareAndSwap(settledNone, i)
			}
		}
	}
	if i > settledNone {
		return settledReasons[i-1]
	}
	return ReasonNodeLost
}

// Cancel grace: the default base (Options.CancelGrace may set another),
// and the margin over an adapter's configured kill grace (CLI providers'
// kill_grace_ms: SIGTERM, then SIGKILL after it).
const (
	baseCancelGrace   = 5 * time.Second
	cancelGraceMargin = 3 * time.Second
	maxCancelGrace    = 2 * time.Minute
)

// cancelGraceFrom is the CancelGrace of a lease on a provider with spec,
// from base (the default when not positive): raised to outlast the
// provider's kill grace, and capped.
func cancelGraceFrom(base time.Duration, spec config.ProviderSpec) time.Duration {
	grace := base
	if grace <= 0 {
		grace = baseCancelGrace
	}
	if ms, err := strconv.Atoi(spec.Settings()["kill_grace_ms"]); err == nil && ms > 0 {
		grace = max(grace, time.Duration(ms)*time.Millisecond+cancelGraceMargin)
	}
	return min(grace, maxCancelGrace)
}

// Release returns the lease with reason. Only the first call (or fencing)
// counts; it reports whether this call released it.
func (l *Lease) Release(reason ReleaseReason) bool {
	l.d.mu.Lock()
	defer l.d.mu.Unlock()
	if !l.d.releaseLocked(l, reason) {
		return false
	}
	// A holder's release frees a slot whatever its reason (node_lost
	// included): hand it on at once. A no-op when the resource is offline.
	l.d.pumpLocked(l.res)
	return true
}

// Released reports whether the lease has returned, and why.
func (l *Lease) Released() (bool, ReleaseReason) {
	l.d.mu.Lock()
	defer l.d.mu.Unlock()
	return l.released, l.reason
}

func (d *Dispatcher) releaseLocked(l *Lease, reason ReleaseReason) bool {
	if l.released {
		return false
	}
	if reason == ReasonError && l.res.conn == l.conn && l.res.dying() && l.settled.Load() == settledNone {
		// The exchange failed because the node's connection died; the fence
		// that follows would have said so. (Not when the node's own
		// terminal ended it: its connection died after it answered.)
		reason = ReasonNodeLost
	}
	l.released, l.reason = true, reason
	r := l.res
	delete(r.leases, l)
	if l.ledgerID != "" {
		d.returnLocked(r, l.ledgerID)
	}
	if r.live && r.gen == l.gen {
		r.inFlight--
		if l.Long {
			r.longInFlight--
		}
	}
	d.metrics.leaseReleased(r.key, reason)
	// No pumping here: fencing and reload release leases of a resource that
	// is going offline in the same step, whose slots must not be handed out.
	// Lease.Release pumps.
	return true
}
