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
			d.flushReturnsLog(batch, st.unsure, st.lost, &st.refused, ttl)
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
	lost    lostReturns
	refused cluster.RefusalLog
	// fenced is scratch for applyBatch: when the re-adds of the returns
	// it fenced were sent, by lease id. send is scratch too: a batch with
	// lost returns sent again.
	fenced map[string]time.Time
	send   []cluster.Update
	// probeAt is when Redis is probed while an outage is open; sweepAt
	// when unsure's and lost's entries a TTL old are dropped next (zero:
	// none recorded since the last sweep); retryAt when the first lost
	// return is due (zero: none kept), sent then alone unless a batch
	// carried it before (while no outage is open: the probe resends them
	// once it ends).
	probeAt, sweepAt, retryAt time.Time
	// timer fires at timerAt (zero: stopped or fired).
	timer   *time.Timer
	timerAt time.Time
}

// newReturnerState is a returner's state before its first batch (its
// timer stopped).
func newReturnerState() *returnerState {
	st := &returnerState{unsure: unsureReadds{}, lost: lostReturns{}, fenced: map[string]time.Time{}, timer: time.NewTimer(time.Hour)}
	st.timer.Stop()
	return st
}

// applyBatch fences the returns of batch whose re-add is unsure, sends
// it with the lost returns due (see lostReturns), and notes the outcome.
// Without unsure re-adds or lost returns it costs three length checks
// more than the send when Redis applies it.
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
		// open until now is over. The lost returns sent again were
		// answered too; those refused are sent again later, as are
		// the batch's own refused returns.
		st.lost.answered(send, len(batch), refusedUpdates(err), st.fenced, now, ttl)
		st.outage.record(d.log, len(batch), 0, nil)
		st.refused.Every = d.ledger.RefusalLogEvery()
		st.refused.Record(d.log, len(send), err, now)
	case err != nil:
		// The resent returns this outage has not counted yet (those
		// refused before it, or lost in an earlier one) count now; a
		// return lost in this outage and resent into it does not
		// count twice.
		serial := st.outage.open()
		resent := st.lost.count(send[len(batch):], serial)
		st.unsure.add(batch, now, ttl)
		st.lost.keep(batch, st.fenced, now, ttl)
		st.lost.count(batch, serial)
		st.probeAt = now.Add(outageProbe)
		st.outage.record(d.log, len(batch), resent, err)
	default:
		if len(send) > len(batch) {
			st.lost.answered(send, len(batch), nil, nil, now, ttl)
		}
		st.outage.record(d.log, len(batch), 0, nil)
	}
	if st.sweepAt.IsZero() && (len(st.unsure) > 0 || len(st.lost) > 0) {
		st.sweepAt = now.Add(ttl)
	}
	if len(st.fenced) > 0 {
		clear(st.fenced)
	}
	st.retryAt = time.Time{}
	if len(st.lost) > 0 {
		st.retryAt = st.lost.due(now)
	}
	st.arm()
}

// returnerTick drops the unsure entries a TTL old, probes Redis while an
// outage is open and warns of the refusals held back, when their times
// have come.
func (d *Dispatcher) returnerTick(st *returnerState, ttl time.Duration) {
	now := time.Now()
	st.refused.Every = d.ledger.RefusalLogEvery()
	st.refused.FlushDue(d.log, now)
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
				// No batch may follow for long: the lost returns
				// free their slots now, and the fences are written
				// before a re-add on its way lands.
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
	} else if st.outage.batches == 0 && !st.retryAt.IsZero() && !now.Before(st.retryAt) && d.ctx.Err() == nil {
		// Lost returns due and no batch went out to carry them: an
		// idle edge would otherwise leave their slots taken, in every
		// edge's count, until their leases expire.
		d.applyBatch(st, nil, ttl)
	}
	st.arm()
}

// arm sets the timer for the earliest of the probe (while an outage is
// open), the lost returns' retry (while none is), the sweep and the
// warning of refusals held back, unless it is set for sooner already.
// Without an outage, lost returns, unsure entries or refusals it costs
// four checks.
func (st *returnerState) arm() {
	var at time.Time
	if st.outage.batches > 0 {
		at = st.probeAt
	} else {
		at = st.retryAt
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
	// serial numbers the outages (0: none yet), the open one's or the
	// last's: lostReturn.counted tells by it whether a lost return was
	// counted in the open outage.
	serial uint64
}

// open is the serial of the open outage, or of the one the next failure
// opens.
func (o *applyOutage) open() uint64 {
	if o.batches == 0 {
		return o.serial + 1
	}
	return o.serial
}

// record notes one batch of n updates sent with resent lost returns not
// counted yet in the outage (see lostReturns.count), err its outcome: a
// failure is counted (and logged at debug level); a success after
// failures ends the outage. A batch of lost returns alone (n = 0), sent
// right after the probe that ended their outage, counts them.
func (o *applyOutage) record(log *zap.Logger, n, resent int, err error) {
	if err == nil {
		o.end(log, "until Redis answered again")
		return
	}
	if o.batches == 0 {
		o.since, o.first = time.Now(), err
		o.serial++
	}
	n += resent
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
	*o = applyOutage{serial: o.serial}
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

// maxLost bounds the lost returns the returner keeps to send again (as
// many as the returns it may have queued).
const maxLost = returnQueue

// lostRetry is how long a return kept after Redis refused it waits before
// it is sent again, with a batch or alone: Redis refuses it for as long as
// it is out of memory or read-only (or a key of another type stays), and
// sending it with every batch meanwhile would only grow each batch. Each
// refusal in a row doubles the wait, up to lostRetry<<lostRetryShifts. A
// var: tests shorten it (set before the dispatcher starts, restored after
// Close).
var lostRetry = outageProbe

// lostRetryShifts bounds the doublings of lostRetry between two sends of
// a return refused again and again (a return waits no longer than its
// lease's TTL anyway).
const lostRetryShifts = 4 // lostRetry << 4: 32 s

// lostReturns is the returns whose batch failed without an answer, and
// those Redis refused, by lease id (owned by the returner goroutine).
// Such a return may never have taken effect: its lease, no longer
// renewed, holds its slot in every edge's count until it
// expires (up to a TTL), and a fenced one's lease may moreover be put
// back by the re-add it was fenced for, still on its way (its unsure
// entry ended when it was fenced). Each is sent again (fenced if it was)
// with the next batches, alone right after the first probe Redis answers
// or on the returner's timer once due (a refused one waits lostRetry,
// doubling; see retryAfter), and first in the shutdown flush, until a
// batch carrying it is answered without refusing it, or until a TTL after
// its at (see lostReturn).
//
// A return sent again can remove no other lease than its own: lease ids
// are <edge id>/<n>, the edge id this process's own (its host name and 48
// random bits, edgeapp's edgeID) and n its ledger's counter, which never
// repeats, so no lease taken after the return was lost bears its id. A
// take of that id that ran before it (one that got no answer, see
// returnLostTakeLocked) is the very slot the return must free; one still
// on its way finds the fenced return's mark and takes nothing; and a
// lease's OpReadd is queued only while the lease is held, so before its
// return, never after. A return applied twice removes nothing more, and
// is not announced again (cluster.Ledger.Apply); a fence's mark is
// rewritten.
type lostReturns map[string]lostReturn

// lostReturn is one lost return.
type lostReturn struct {
	key string
	// at is when the lease's re-add was sent (a fenced return) or when
	// the return's batch failed: a TTL later a command lost that long is
	// not run any more, and the lease, not renewed since its release,
	// has expired.
	at time.Time
	// retryAt is zero, or, once Redis refused the return, when it is
	// sent again (with a batch, or alone once it is due).
	retryAt time.Time
	// refusals is how many sends of it Redis refused in a row (see
	// lostRetry); counted the serial of the last outage that counted it
	// (applyOutage.serial).
	refusals uint8
	counted  uint64
	fence    bool
}

// retryAfter is when a return refused the refusals-th time in a row at
// now is sent again.
func retryAfter(now time.Time, refusals uint8) time.Time {
	return now.Add(lostRetry << min(refusals-1, lostRetryShifts))
}

// keep records the returns of batch, whose batch failed without an
// answer; fenced holds when the re-adds of the fenced ones were sent
// (fenceInto). Past maxLost, after dropping the stale entries, a fenced
// return takes the place of a plain one (its lease may be put back for a
// TTL, not only kept one), and the rest are not kept: such a lease holds
// its slot until it expires.
func (l lostReturns) keep(batch []cluster.Update, fenced map[string]time.Time, now time.Time, ttl time.Duration) {
	for _, op := range batch {
		if op.Kind == cluster.OpReturn {
			l.add(op, fenced, now, time.Time{}, ttl)
		}
	}
}

// add records the return op, to be sent again from retryAt on (zero: with
// the next batch), within the bound (see keep).
func (l lostReturns) add(op cluster.Update, fenced map[string]time.Time, now, retryAt time.Time, ttl time.Duration) {
	at := now
	if t, ok := fenced[op.ID]; ok && op.Fence {
		at = t
	}
	if _, ok := l[op.ID]; !ok && len(l) >= maxLost {
		l.expire(now, ttl)
		if len(l) >= maxLost && !(op.Fence && l.dropPlain()) {
			return
		}
	}
	r := lostReturn{key: op.Key, at: at, retryAt: retryAt, fence: op.Fence}
	if !retryAt.IsZero() {
		r.refusals = 1
	}
	l[op.ID] = r
}

// count marks the returns of ops that l keeps as counted in the outage of
// serial, and returns how many were not yet.
func (l lostReturns) count(ops []cluster.Update, serial uint64) int {
	n := 0
	for _, op := range ops {
		if r, ok := l[op.ID]; ok && op.Kind == cluster.OpReturn && r.counted != serial {
			r.counted = serial
			l[op.ID] = r
			n++
		}
	}
	return n
}

// due is when the first of the returns is to be sent again: now for one
// lost without an answer (sent with the next batch, or alone as soon as
// no outage is open), the earliest retryAt of the refused ones otherwise.
func (l lostReturns) due(now time.Time) time.Time {
	var at time.Time
	for _, r := range l {
		t := r.retryAt
		if t.Before(now) {
			return now
		}
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at
}

// dropPlain forgets one unfenced return, and reports whether there was
// one.
func (l lostReturns) dropPlain() bool {
	for id, r := range l {
		if !r.fence {
			delete(l, id)
			return true
		}
	}
	return false
}

// resend appends to dst up to limit of the lost returns due at now (not
// waiting after a refusal), each fenced if it was, dropping those a TTL
// past their at.
func (l lostReturns) resend(dst []cluster.Update, now time.Time, ttl time.Duration, limit int) []cluster.Update {
	n := 0
	for id, r := range l {
		if now.Sub(r.at) >= ttl {
			delete(l, id)
			continue
		}
		if n == limit || r.retryAt.After(now) {
			continue // the stale ones past the limit are still dropped
		}
		dst = append(dst, cluster.Update{Kind: cluster.OpReturn, Key: r.key, ID: id, Fence: r.fence})
		n++
	}
	return dst
}

// answered notes a batch Redis answered: send is what was sent, the lost
// returns resent from index from on, and refused the indices Redis
// refused, ascending. The resent returns are forgotten, save the refused
// ones, which are sent again later (retryAfter); a return of the batch
// that Redis refused is kept the same way, within maxLost, fenced ones
// first (the re-add it was fenced for may still be on its way; fenced
// holds when it was sent). A key of another type refuses a plain one for
// as long as it stays: it is then sent again a few times until its lease
// has expired, as a lost one is (its slot is taken meanwhile anyway).
func (l lostReturns) answered(send []cluster.Update, from int, refused []int, fenced map[string]time.Time, now time.Time, ttl time.Duration) {
	retryAt := retryAfter(now, 1)
	for i, op := range send {
		isRefused := len(refused) > 0 && refused[0] == i
		if isRefused {
			refused = refused[1:]
		}
		switch {
		case i < from:
			if isRefused && op.Kind == cluster.OpReturn {
				l.add(op, fenced, now, retryAt, ttl)
			}
		case !isRefused:
			delete(l, op.ID)
		default:
			if r, ok := l[op.ID]; ok {
				r.refusals = min(r.refusals+1, lostRetryShifts+1)
				r.retryAt = retryAfter(now, r.refusals)
				l[op.ID] = r
			}
		}
	}
}

// allDue makes every lost return due, those waiting after a refusal too
// (the shutdown flush is their last chance).
func (l lostReturns) allDue() {
	for id, r := range l {
		if !r.retryAt.IsZero() {
			r.retryAt = time.Time{}
			l[id] = r
		}
	}
}

// expire drops the entries a TTL or more past their at, and returns when
// the oldest of the others is (zero when none is left).
func (l lostReturns) expire(now time.Time, ttl time.Duration) time.Time {
	var next time.Time
	for id, r := range l {
		if now.Sub(r.at) >= ttl {
			delete(l, id)
		} else if end := r.at.Add(ttl); next.IsZero() || end.Before(next) {
			next = end
		}
	}
	return next
}

// refusedUpdates is the indices of the updates err (an Apply's) says
// Redis refused, ascending; nil when it names none.
func refusedUpdates(err error) []int {
	var r *cluster.Refusal
	if errors.As(err, &r) {
		return r.Updates
	}
	return nil
}

// CloseFlush bounds what Close spends sending the ledger updates still
// queued (a Redis that does not answer must not hold shutdown up). It is
// part of the longest an edge takes to stop (edgeapp.MaxStop).
const CloseFlush = 2 * time.Second

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
// returns, those waiting after a refusal too (the last chance to send
// them).
func (d *Dispatcher) flushReturnsLost(batch []cluster.Update, unsure unsureReadds, lost lostReturns, ttl time.Duration) {
	var refused cluster.RefusalLog // one warning per kind of reply
	d.flushReturnsLog(batch, unsure, lost, &refused, ttl)
}

// flushReturnsLog is flushReturnsLost recording the batches Redis refused
// in refused (the returner's: a kind it warned of within the minute is not
// warned of again), whose refusals held back it warns of once done, the
// shutdown's with them: no later call would tell them.
func (d *Dispatcher) flushReturnsLog(batch []cluster.Update, unsure unsureReadds, lost lostReturns, refused *cluster.RefusalLog, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), CloseFlush)
	defer cancel()
	defer func() {
		now := time.Now()
		refused.Flush(d.log, now, now)
	}()
	var again []cluster.Update
	if len(lost) > 0 {
		lost.allDue()
		again = lost.resend(nil, time.Now(), ttl, maxLost)
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
