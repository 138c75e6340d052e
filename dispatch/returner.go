package dispatch

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/dispatch/cluster"
)

// returner sends the ledger updates queued under d.mu (lease returns,
// waiters joining and leaving their wait sets) in the order they were
// queued, what has gathered since its last round trip in one pipeline
// (cluster.Ledger.Apply): a burst of releases costs a few round trips, not
// one each, so the ledger does not fall behind the edge's own counts.
//
// A failed batch is logged at debug level only: while Redis does not
// answer every batch fails, and the renewals already warn that it is down.
// The outage's one warning, with what it cost, comes at the next batch
// that is applied, at the first probe Redis answers (outageProbe after
// the last failure, when no batch follows), or at Close. A batch Redis
// answered with error replies is no outage (cluster.RefusalLog).
func (d *Dispatcher) returner(ttl time.Duration) {
	batch := make([]cluster.Update, 0, ledgerBatch)
	st := newReturnerState()
	defer st.timer.Stop()
	for {
		select {
		case <-d.ctx.Done():
			// Takes are counted under d.mu, and none starts once ctx
			// is done: past this lock every take in flight is counted,
			// and the returns they queue come before the last batch.
			d.mu.Lock()
			d.mu.Unlock()
			d.takes.Wait()
			st.outage.end(d.log, "until shutdown")
			now := time.Now()
			st.refused.Flush(d.log, now, now)
			d.flushReturnsLost(batch, st.unsure, st.lost, ttl)
			return
		case <-st.timer.C:
			st.timerAt = time.Time{}
			d.returnerTick(st, ttl)
			continue
		case u := <-d.returns:
			batch = append(batch[:0], u)
		}
	more:
		for len(batch) < ledgerBatch {
			select {
			case u := <-d.returns:
				batch = append(batch, u)
			default:
				break more
			}
		}
		d.applyBatch(st, batch, ttl)
	}
}

// outageProbe is how long after a failed batch, with none sent since, the
// returner asks Redis (PING) whether it answers again, and again after
// each unanswered probe, so that an outage's warning is not held back
// until the next lease is released or Close.
const outageProbe = 2 * time.Second

// returnerState is what the returner keeps between batches (owned by the
// returner goroutine).
type returnerState struct {
	outage  applyOutage
	unsure  unsureReadds
	lost    lostFences
	refused cluster.RefusalLog
	// fenced is scratch for applyBatch: when the re-adds of the returns
	// it fenced were sent, by lease id. send is scratch too: a batch with
	// lost fenced returns sent again.
	fenced map[string]time.Time
	send   []cluster.Update
	// probeAt is when Redis is probed while an outage is open; sweepAt
	// when unsure's and lost's entries a TTL old are dropped next (zero:
	// none recorded since the last sweep).
	probeAt, sweepAt time.Time
	// timer fires at timerAt (zero: stopped or fired).
	timer   *time.Timer
	timerAt time.Time
}

// newReturnerState is a returner's state before its first batch (its
// timer stopped).
func newReturnerState() *returnerState {
	st := &returnerState{unsure: unsureReadds{}, lost: lostFences{}, fenced: map[string]time.Time{}, timer: time.NewTimer(time.Hour)}
	st.timer.Stop()
	return st
}

// applyBatch fences the returns of batch whose re-add is unsure, sends
// it with the lost fenced returns (see lostFences), and notes the
// outcome. Without unsure re-adds or lost fences it costs two length
// checks more than the send.
func (d *Dispatcher) applyBatch(st *returnerState, batch []cluster.Update, ttl time.Duration) {
	now := time.Now()
	st.unsure.fenceInto(batch, now, ttl, st.fenced)
	send := batch
	if len(st.lost) > 0 {
		send = st.lost.resend(append(st.send[:0], batch...), now, ttl, ledgerBatch)
		st.send = send[:0]
	}
	// Not cancelled by Close (Apply is bounded by the ledger's own
	// timeout): a batch cut off mid-send would lose its returns.
	err := d.ledger.Apply(context.WithoutCancel(d.ctx), send)
	switch {
	case errors.Is(err, cluster.ErrRefused):
		// Redis answered every update: the refused ones never take
		// effect, so no re-add of the batch is unsure, and an outage
		// open until now is over. The lost fenced returns sent again
		// were answered too (a refused one is not sent a third time).
		st.lost.answered(send[len(batch):])
		st.outage.record(d.log, len(batch), nil)
		st.refused.Record(d.log, len(send), err, now)
	case err != nil:
		st.unsure.add(batch, now, ttl)
		st.lost.keep(batch, st.fenced, now, ttl)
		if st.sweepAt.IsZero() && (len(st.unsure) > 0 || len(st.lost) > 0) {
			st.sweepAt = now.Add(ttl)
		}
		st.probeAt = now.Add(outageProbe)
		st.outage.record(d.log, len(batch), err)
	default:
		st.lost.answered(send[len(batch):])
		st.outage.record(d.log, len(batch), nil)
	}
	if len(st.fenced) > 0 {
		clear(st.fenced)
	}
	st.arm()
}

// returnerTick drops the unsure entries a TTL old, probes Redis while an
// outage is open and warns of the refusals held back, when their times
// have come.
func (d *Dispatcher) returnerTick(st *returnerState, ttl time.Duration) {
	now := time.Now()
	st.refused.Flush(d.log, now.Add(-cluster.RefusalLogEvery), now)
	if !st.sweepAt.IsZero() && !now.Before(st.sweepAt) {
		st.sweepAt = st.unsure.expire(now, ttl)
		if next := st.lost.expire(now, ttl); !next.IsZero() && (st.sweepAt.IsZero() || next.Before(st.sweepAt)) {
			st.sweepAt = next
		}
		// At most eight sweeps a TTL, however the entries' times spread.
		if !st.sweepAt.IsZero() {
			st.sweepAt = later(st.sweepAt, now.Add(ttl/8))
		}
	}
	if st.outage.batches > 0 && !now.Before(st.probeAt) {
		err := d.ledger.Ping(d.ctx)
		switch {
		case err == nil:
			st.outage.end(d.log, "until Redis answered again")
			if len(st.lost) > 0 {
				// No batch may follow for long: the fences are
				// written now, before a re-add on its way lands.
				d.applyBatch(st, nil, ttl)
			}
		case d.ctx.Err() != nil:
			// Close: the outage is told at shutdown. Not probed
			// again meanwhile (the timer must not fire at once
			// while the returner turns to its last batch).
			st.probeAt = time.Now().Add(outageProbe)
		default:
			st.probeAt = time.Now().Add(outageProbe)
			d.log.Debug("cluster ledger probe not answered", zap.Error(err))
		}
	}
	st.arm()
}

// arm sets the timer for the earliest of the probe (while an outage is
// open), the sweep and the warning of refusals held back, unless it is set
// for sooner already. Without an outage, unsure entries or refusals it
// costs three checks.
func (st *returnerState) arm() {
	var at time.Time
	if st.outage.batches > 0 {
		at = st.probeAt
	}
	if due := st.refused.Due(); !due.IsZero() && (at.IsZero() || due.Before(at)) {
		at = due
	}
	if !st.sweepAt.IsZero() && (at.IsZero() || st.sweepAt.Before(at)) {
		at = st.sweepAt
	}
	if at.IsZero() || (!st.timerAt.IsZero() && !at.Before(st.timerAt)) {
		return
	}
	st.timerAt = at
	st.timer.Reset(time.Until(at))
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// applyOutage is the returner's record of the batches that failed since
// the last one applied (owned by the returner goroutine).
type applyOutage struct {
	batches, updates int
	since            time.Time
	first            error
}

// record notes one batch of n updates sent, err its outcome: a failure
// is counted (and logged at debug level); a success after failures ends
// the outage.
func (o *applyOutage) record(log *zap.Logger, n int, err error) {
	if err == nil {
		o.end(log, "until Redis answered again")
		return
	}
	if o.batches == 0 {
		o.since, o.first = time.Now(), err
	}
	o.batches++
	o.updates += n
	log.Debug("cluster ledger updates not applied", zap.Int("updates", n), zap.Error(err))
}

// end logs the outage's one warning, if batches failed since the last one
// applied, and forgets them. until says how the outage ended.
func (o *applyOutage) end(log *zap.Logger, until string) {
	if o.batches == 0 {
		return
	}
	log.Warn("cluster ledger updates not applied "+until+"; their leases expire within the TTL, their waiters age out",
		zap.Int("batches", o.batches), zap.Int("updates", o.updates),
		zap.Duration("outage", time.Since(o.since)), zap.Error(o.first))
	*o = applyOutage{}
}

// maxUnsure bounds the leases whose re-add the returner is unsure of.
const maxUnsure = returnQueue

// unsureReadds is the leases whose OpReadd was in a batch that failed
// without an answer, by ledger id, with when it was sent (owned by the
// returner goroutine). Such a re-add may still run in Redis after the
// lease's return, which the returner sends in a later batch, possibly on
// another connection: that return is fenced (cluster.Update.Fence), or
// the re-add would hold the slot, for nobody, for the TTL. An entry ends
// with its lease's return, or once a TTL has passed (a command lost that
// long is not run any more).
type unsureReadds map[string]time.Time

// add records the re-adds of a failed batch (while fewer than maxUnsure
// are recorded after dropping the stale ones: past that, a late re-add
// holds its slot for a TTL, as before fencing). A re-add followed by its
// lease's return in the same batch is not recorded: the batch runs in
// order, if at all, and that return is never sent again to end the entry.
func (u unsureReadds) add(batch []cluster.Update, now time.Time, ttl time.Duration) {
	for i, op := range batch {
		if op.Kind != cluster.OpReadd || returnedAfter(batch[i+1:], op.ID) {
			continue
		}
		if len(u) >= maxUnsure {
			for id, at := range u {
				if now.Sub(at) >= ttl {
					delete(u, id)
				}
			}
			if len(u) >= maxUnsure {
				return
			}
		}
		u[op.ID] = now
	}
}

// returnedAfter reports whether ops holds the return of lease id.
func returnedAfter(ops []cluster.Update, id string) bool {
	for _, op := range ops {
		if op.Kind == cluster.OpReturn && op.ID == id {
			return true
		}
	}
	return false
}

// expire drops the entries recorded a TTL or more before now (a re-add
// lost that long is not run any more, and an entry whose return failed
// would otherwise stay until the set is full), and returns when the
// oldest of the others is a TTL old (zero when none is left).
func (u unsureReadds) expire(now time.Time, ttl time.Duration) time.Time {
	var next time.Time
	for id, at := range u {
		if now.Sub(at) >= ttl {
			delete(u, id)
		} else if end := at.Add(ttl); next.IsZero() || end.Before(next) {
			next = end
		}
	}
	return next
}

// fence marks the returns in batch of leases whose re-add is unsure. A
// nil or empty u costs one length check per batch.
func (u unsureReadds) fence(batch []cluster.Update, now time.Time, ttl time.Duration) {
	u.fenceInto(batch, now, ttl, nil)
}

// fenceInto is fence, which also records in fenced (when not nil) when
// the re-add of each return it fences was sent, by lease id.
func (u unsureReadds) fenceInto(batch []cluster.Update, now time.Time, ttl time.Duration, fenced map[string]time.Time) {
	if len(u) == 0 {
		return
	}
	for i := range batch {
		if batch[i].Kind != cluster.OpReturn {
			continue
		}
		if at, ok := u[batch[i].ID]; ok {
			delete(u, batch[i].ID)
			batch[i].Fence = now.Sub(at) < ttl
			if batch[i].Fence && fenced != nil {
				fenced[batch[i].ID] = at
			}
		}
	}
}

// maxLostFences bounds the fenced returns the returner keeps to send
// again (as many as the unsure re-adds they come from).
const maxLostFences = maxUnsure

// lostFences is the fenced returns whose batch failed without an answer,
// by lease id (owned by the returner goroutine). Such a return may never
// have reached Redis, and its lease's unsure entry ended when it was
// fenced: forgotten, the re-add it was fenced for, still on its way, could
// hold the slot for nobody for the TTL. Each is sent again, fenced, with
// the next batches (or alone at the first probe Redis answers) until a
// batch carrying it is answered, or until a TTL after its re-add was sent
// (a command lost that long is not run any more, and the lease, not
// renewed since its release, has expired). A return applied twice removes
// nothing more, and its mark is rewritten.
type lostFences map[string]lostFence

// lostFence is one lost fenced return: its lease key and when its lease's
// re-add was sent.
type lostFence struct {
	key string
	at  time.Time
}

// keep records the fenced returns of batch, whose batch failed; fenced
// holds when their re-adds were sent (fenceInto). Past maxLostFences,
// after dropping the stale entries, the rest are not kept: such a lease
// can hold its slot for one TTL, as before fencing.
func (l lostFences) keep(batch []cluster.Update, fenced map[string]time.Time, now time.Time, ttl time.Duration) {
	if len(fenced) == 0 {
		return
	}
	for _, op := range batch {
		at, ok := fenced[op.ID]
		if !ok || op.Kind != cluster.OpReturn || !op.Fence {
			continue
		}
		if len(l) >= maxLostFences {
			l.expire(now, ttl)
			if len(l) >= maxLostFences {
				return
			}
		}
		l[op.ID] = lostFence{key: op.Key, at: at}
	}
}

// resend appends to dst up to limit of the lost fenced returns, as
// fenced returns, dropping those whose re-add was sent a TTL or more
// before now.
func (l lostFences) resend(dst []cluster.Update, now time.Time, ttl time.Duration, limit int) []cluster.Update {
	n := 0
	for id, f := range l {
		if now.Sub(f.at) >= ttl {
			delete(l, id)
			continue
		}
		if n == limit {
			continue // the stale ones past the limit are still dropped
		}
		dst = append(dst, cluster.Update{Kind: cluster.OpReturn, Key: f.key, ID: id, Fence: true})
		n++
	}
	return dst
}

// answered forgets the lost fenced returns in sent, which Redis answered.
func (l lostFences) answered(sent []cluster.Update) {
	for _, op := range sent {
		delete(l, op.ID)
	}
}

// expire drops the entries whose re-add was sent a TTL or more before
// now, and returns when the oldest of the others is a TTL old (zero when
// none is left).
func (l lostFences) expire(now time.Time, ttl time.Duration) time.Time {
	var next time.Time
	for id, f := range l {
		if now.Sub(f.at) >= ttl {
			delete(l, id)
		} else if end := f.at.Add(ttl); next.IsZero() || end.Before(next) {
			next = end
		}
	}
	return next
}

// closeFlush bounds what Close spends sending the ledger updates still
// queued (a Redis that does not answer must not hold shutdown up).
const closeFlush = 2 * time.Second

// flushReturns sends what is still queued once Close has cancelled d.ctx:
// a lease released just before Close (a request that ended as the edge's
// drain did) keeps its slot taken for the lease TTL when its return is
// dropped. batch is scratch space. Registrations of waiters (Close fails
// them) and leases put back (no longer renewed; see readd) are
// dropped: sent now, they could only race the returns that follow. It
// stops at the first batch Redis did not answer (the next would wait out
// the timeout as well), not at one it refused. unsure is the returner's;
// nil (from sendLate, once the returner and its set are gone) fences
// every return: any of them may be of a lease whose re-add the returner
// was unsure of, and a lease is returned only once, so a needless fence
// costs one key in Redis for a TTL, at shutdown only.
func (d *Dispatcher) flushReturns(batch []cluster.Update, unsure unsureReadds, ttl time.Duration) {
	d.flushReturnsLost(batch, unsure, nil, ttl)
}

// flushReturnsLost is flushReturns sending first the returner's lost
// fenced returns.
func (d *Dispatcher) flushReturnsLost(batch []cluster.Update, unsure unsureReadds, lost lostFences, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), closeFlush)
	defer cancel()
	var refused cluster.RefusalLog // one warning per kind of reply
	var again []cluster.Update
	if len(lost) > 0 {
		again = lost.resend(nil, time.Now(), ttl, maxLostFences)
	}
	for ctx.Err() == nil {
		n := min(len(again), ledgerBatch)
		batch = append(batch[:0], again[:n]...)
		again = again[n:]
	fill:
		for len(batch) < ledgerBatch {
			select {
			case u := <-d.returns:
				if u.Kind == cluster.OpReturn || u.Kind == cluster.OpUnwait {
					batch = append(batch, u)
				}
			default:
				break fill
			}
		}
		if len(batch) == 0 {
			return
		}
		if unsure == nil {
			for i := range batch {
				batch[i].Fence = batch[i].Kind == cluster.OpReturn
			}
		} else {
			unsure.fence(batch, time.Now(), ttl)
		}
		err := d.ledger.Apply(ctx, batch)
		switch {
		case errors.Is(err, cluster.ErrRefused):
			// Redis answered: the returns queued behind this batch
			// are sent all the same (one key of another type must
			// not cost every other slot the TTL).
			refused.Record(d.log, len(batch), err, time.Now())
		case err != nil:
			d.log.Warn("cluster ledger updates not applied at shutdown; their leases expire within the TTL",
				zap.Int("updates", len(batch)), zap.Error(err))
			return
		}
	}
}
