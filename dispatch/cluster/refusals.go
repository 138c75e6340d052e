package cluster

import (
	"time"

	"go.uber.org/zap"
)

// RefusalLogEvery: each kind of error reply (see ReplyKind) is warned of at
// most once in this long; the batches refused meanwhile are counted in the
// next warning (Flush: this long after the last one). A key of another type refuses every return on it, one
// batch per released lease, for as long as it stays.
const RefusalLogEvery = time.Minute

// maxRefusalKinds bounds the kinds of error reply told apart; the rarer
// ones share the kind "other".
const maxRefusalKinds = 8

// RefusalLog logs the batches of Apply that Redis refused (ErrRefused), at
// most once per kind of reply per RefusalLogEvery. The zero value is ready;
// not safe for concurrent use (one owner, the sender of the batches).
type RefusalLog struct {
	// Msg is the warning's message; empty: that of refused returns.
	Msg string
	// Every is how often each kind is warned of at most; zero (or
	// negative): RefusalLogEvery. Tests shorten it (see
	// Ledger.SetRefusalLogEvery).
	Every time.Duration
	kinds map[string]*refusals
}

// every is r.Every, or RefusalLogEvery when it is not set.
func (r *RefusalLog) every() time.Duration {
	if r.Every <= 0 {
		return RefusalLogEvery
	}
	return r.Every
}

// refusals is what RefusalLog knows of one kind of reply.
type refusals struct {
	logged           time.Time // when it was last warned of
	batches, updates int       // refused since then, not warned of yet
	last             error     // the last of those
}

// Record notes one batch of n updates refused with err at now, and warns
// unless its kind was warned of less than Every ago.
func (r *RefusalLog) Record(log *zap.Logger, n int, err error, now time.Time) {
	kind := ReplyKind(err)
	if r.kinds == nil {
		r.kinds = map[string]*refusals{}
	}
	k := r.kinds[kind]
	if k == nil {
		if len(r.kinds) >= maxRefusalKinds {
			kind = "other"
			k = r.kinds[kind]
		}
		if k == nil {
			k = &refusals{}
			r.kinds[kind] = k
		}
	}
	k.batches++
	k.updates += n
	k.last = err
	if !k.logged.IsZero() && now.Sub(k.logged) < r.every() {
		msg := "cluster ledger refused updates"
		if r.Msg != "" {
			msg = r.Msg
		}
		log.Debug(msg, zap.String("kind", kind), zap.Int("updates", n), zap.Error(err))
		return
	}
	k.warn(log, r.message(), kind, now)
}

// message is the warning's message.
func (r *RefusalLog) message() string {
	if r.Msg != "" {
		return r.Msg
	}
	return "cluster ledger refused updates; Redis answered, the refused returns are sent again until their leases expire within the TTL"
}

// warn tells of the refusals of kind not warned of yet, and forgets them.
func (k *refusals) warn(log *zap.Logger, msg, kind string, now time.Time) {
	log.Warn(msg, zap.String("kind", kind), zap.Int("batches", k.batches), zap.Int("updates", k.updates), zap.Error(k.last))
	k.logged, k.batches, k.updates, k.last = now, 0, 0, nil
}

// Due is when refusals held back (recorded less than Every after their
// kind's last warning) are to be warned of by Flush: Every after that
// warning. Zero when none is held back.
func (r *RefusalLog) Due() time.Time {
	var at time.Time
	for _, k := range r.kinds {
		if k.batches == 0 {
			continue
		}
		if due := k.logged.Add(r.every()); at.IsZero() || due.Before(at) {
			at = due
		}
	}
	return at
}

// Flush warns, at now, of the refusals held back of each kind last warned
// of at or before lastWarned: without it those refused after a warning
// would be told only at debug level when no refusal of their kind follows
// (an operator would read one refused batch where there were many).
func (r *RefusalLog) Flush(log *zap.Logger, lastWarned, now time.Time) {
	for kind, k := range r.kinds {
		if k.batches > 0 && !k.logged.After(lastWarned) {
			k.warn(log, r.message(), kind, now)
		}
	}
}

// FlushDue warns of the refusals held back whose warning is due at now
// (Due): those of each kind last warned of Every or more before now.
func (r *RefusalLog) FlushDue(log *zap.Logger, now time.Time) {
	if due := r.Due(); !due.IsZero() && !now.Before(due) {
		r.Flush(log, now.Add(-r.every()), now)
	}
}

// RefusedOp is a call other than Apply that Redis may refuse (ErrRefused),
// each warned of apart (Ledger.NoteRefused).
type RefusedOp uint8

const (
	// RefusedTake: a grant's take; its request gets cluster_unavailable.
	RefusedTake RefusedOp = iota
	// RefusedRenew: a renewal (or liveness mark); the edge keeps its
	// leases, which expire within the TTL unless a renewal is accepted.
	RefusedRenew
	refusedOps
)

// refusedMsgs are the warnings of each RefusedOp.
var refusedMsgs = [refusedOps]string{
	RefusedTake:  "cluster ledger refused lease grants; Redis answered with an error reply, new requests get cluster_unavailable until it accepts them",
	RefusedRenew: "cluster ledger refused lease renewals; Redis answered with an error reply, this edge keeps its leases but the other edges stop counting them a TTL after the last renewal accepted",
}

// NoteRefused records a call of op that Redis refused with err (one
// ErrRefused), and warns as RefusalLog does: at most once per kind of
// reply per RefusalLogEvery. Safe for concurrent use: takes are refused
// on many goroutines.
func (l *Ledger) NoteRefused(log *zap.Logger, op RefusedOp, err error) {
	l.refusedMu.Lock()
	defer l.refusedMu.Unlock()
	l.refused[op].Record(log, 1, err, time.Now())
}

// FlushRefusals warns of the refusals NoteRefused held back whose
// warning is due at now (see RefusalLog.Flush); the caller calls it now
// and then (the cluster loop's retry tick).
func (l *Ledger) FlushRefusals(log *zap.Logger, now time.Time) {
	l.refusedMu.Lock()
	defer l.refusedMu.Unlock()
	for op := range l.refused {
		l.refused[op].FlushDue(log, now)
	}
}

// SetRefusalLogEvery sets how often NoteRefused warns of each kind of
// reply at most (zero: RefusalLogEvery), and what RefusalLogEvery then
// answers, for tests of the callers' periodic flushes, which the fixed
// minute would otherwise put out of reach. Safe for concurrent use.
func (l *Ledger) SetRefusalLogEvery(every time.Duration) {
	l.refusedMu.Lock()
	defer l.refusedMu.Unlock()
	for op := range l.refused {
		l.refused[op].Every = every
	}
}

// RefusalLogEvery is what SetRefusalLogEvery last set (zero:
// RefusalLogEvery, the constant), for the callers' own RefusalLogs (the
// dispatcher's returner keeps one for Apply). Safe for concurrent use.
func (l *Ledger) RefusalLogEvery() time.Duration {
	l.refusedMu.Lock()
	defer l.refusedMu.Unlock()
	return l.refused[0].Every
}

// FlushAllRefusals warns of every refusal NoteRefused held back, due or
// not: at shutdown, when no later call would tell them (the count of a
// minute's refused grants would otherwise be lost with the process).
func (l *Ledger) FlushAllRefusals(log *zap.Logger) {
	l.refusedMu.Lock()
	defer l.refusedMu.Unlock()
	now := time.Now()
	for op := range l.refused {
		l.refused[op].Flush(log, now, now)
	}
}
