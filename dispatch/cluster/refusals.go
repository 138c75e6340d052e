package cluster

import (
	"time"

	"go.uber.org/zap"
)

// RefusalLogEvery: each kind of error reply (see ReplyKind) is warned of at
// most once in this long; the batches refused meanwhile are counted in the
// next warning. A key of another type refuses every return on it, one
// batch per released lease, for as long as it stays.
const RefusalLogEvery = time.Minute

// maxRefusalKinds bounds the kinds of error reply told apart; the rarer
// ones share the kind "other".
const maxRefusalKinds = 8

// RefusalLog logs the batches of Apply that Redis refused (ErrRefused), at
// most once per kind of reply per RefusalLogEvery. The zero value is ready;
// not safe for concurrent use (one owner, the sender of the batches).
type RefusalLog struct {
	kinds map[string]*refusals
}

// refusals is what RefusalLog knows of one kind of reply.
type refusals struct {
	logged           time.Time // when it was last warned of
	batches, updates int       // refused since then, not warned of yet
}

// Record notes one batch of n updates refused with err at now, and warns
// unless its kind was warned of less than RefusalLogEvery ago.
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
	if !k.logged.IsZero() && now.Sub(k.logged) < RefusalLogEvery {
		log.Debug("cluster ledger refused updates", zap.String("kind", kind), zap.Int("updates", n), zap.Error(err))
		return
	}
	log.Warn("cluster ledger refused updates; Redis answered, the refused returns' leases expire within the TTL",
		zap.String("kind", kind), zap.Int("batches", k.batches), zap.Int("updates", k.updates), zap.Error(err))
	k.logged, k.batches, k.updates = now, 0, 0
}
