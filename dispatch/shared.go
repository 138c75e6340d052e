package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/dispatch/cluster"
)

// Shared leases (cluster.redis.address). With a ledger, a grant takes the
// lease in the cluster's ledger too (cluster.Ledger.Take: atomic across
// edges), so the edges together never hold more than a provider's
// capacity; without one nothing here runs and leases are counted in this
// process only.
//
// What each piece does:
//   - a grant takes the ledger slot before counting the lease, with the
//     lock released and the local slot reserved meanwhile (a fresh
//     request: grantClusterLocked; a waiter: handOnLocked); a provider the
//     ledger says is full (other edges hold its slots) is marked
//     remoteFull and not offered again until a return is announced or
//     retryRemoteFull passes; one whose queued grant failed because Redis
//     did not answer is marked ledgerRetry and pumped again by the retry
//     tick once the backoff has passed;
//   - a released lease goes back to the ledger from the returner (bounded
//     queue, never under the lock); a return whose batch got no answer,
//     or that Redis refused, is sent again (lostReturns), one that cannot
//     be made expires within the TTL; one released after Close is sent by a short-lived
//     goroutine of its own (sendLate);
//   - the cluster loop renews this edge's leases every TTL/3 (sooner
//     after a renewal failed) and puts back, through the returner, those
//     the ledger lost while it could not renew them (renewLeases), wakes
//     the providers whose return another edge announced (pub/sub), and
//     retries remoteFull providers every retryRemoteFull, so a lost
//     announcement delays a waiter, never strands it;
//   - Redis unreachable: Take fails, and Acquire answers
//     ErrClusterUnavailable (503 cluster_unavailable) instead of granting
//     a lease the cluster cannot account for; waiters stay queued (up to
//     their timeout) and are served once Redis answers again.
//
// The provider's node enforces the same capacity with its own gate, so
// even a ledger that lost state (a Redis restart without persistence)
// cannot make a backend see more than its capacity: edges would at worst
// send work the node refuses (capacity_exceeded, which fails over).

// ErrClusterUnavailable: the shared ledger (Redis) cannot be reached.
var ErrClusterUnavailable = errors.New("dispatch: cluster ledger unavailable")

// retryRemoteFull is how long a provider the ledger called full is left
// alone when no return announcement arrives (a var: tests make it long, so
// that only announcements wake a provider).
var retryRemoteFull = 200 * time.Millisecond

const (
	// returnQueue bounds the returns waiting for the returner.
	returnQueue = 4096
	// waitQueue is how much of returnQueue waiters' registrations and
	// removals may fill: a burst of waiters must not crowd out lease
	// returns, whose loss costs the cluster a slot for a TTL (a dropped
	// registration costs only the waiter's claim to fairness).
	waitQueue = returnQueue / 2
	// ledgerBatch bounds the updates the returner sends in one round trip.
	ledgerBatch = 128
	// ledgerBackoff: after a failed grant, grants fail at once for this
	// long instead of each waiting out the Redis timeout (queued grants
	// are left to the retry tick).
	ledgerBackoff = 500 * time.Millisecond
)

// errYield: the ledger owes the slot to an older waiter of another edge.
var errYield = errors.New("dispatch: an older waiter of another edge goes first")

// startCluster starts the returner and the cluster loop (Owner: the
// Dispatcher; both stop when Close cancels d.ctx).
func (d *Dispatcher) startCluster(ttl time.Duration) {
	d.returns = make(chan cluster.Update, returnQueue)
	d.wg.Add(2)
	// Owner: the Dispatcher. Stops when Close cancels d.ctx.
	go func() {
		defer d.wg.Done()
		d.returner(ttl)
	}()
	// Owner: the Dispatcher. Stops when Close cancels d.ctx.
	go func() {
		defer d.wg.Done()
		d.clusterLoop(ttl)
	}()
}

// clusterLoop renews, listens for return announcements and retries
// providers marked full.
func (d *Dispatcher) clusterLoop(ttl time.Duration) {
	sub := d.ledger.Client().Subscribe(d.ctx, d.ledger.FreedChannel())
	defer sub.Close()
	freed := sub.Channel()
	renew := time.NewTicker(ttl / 3)
	defer renew.Stop()
	retry := time.NewTicker(retryRemoteFull)
	defer retry.Stop()
	// renewAgain is set while the last renewal failed (renewed says
	// how): the next one is tried on the retry tick from then on, so
	// that leases the ledger lost during an outage are put back soon
	// after Redis answers again, not up to TTL/3 later (other edges
	// over-grant meanwhile).
	var renewAgain time.Time
	var renewed renewOutcome
	// The grants and renewals refused after their kind's last warning
	// are told at shutdown, as the returner tells its refused returns.
	defer d.ledger.FlushAllRefusals(d.log)
	// The first tick at once, not TTL/3 after the start: take.lua lets
	// other edges' takes yield to this edge's waiters only while its
	// liveness key lives, and the tick sets it (with the renewals and the
	// pending figures, one round trip). One that fails is tried again on
	// the retry tick, as any failed renewal, not TTL/3 later.
	renewAgain, renewed = d.renewLeases(renewed)
	for {
		select {
		case <-d.ctx.Done():
			return
		case m, ok := <-freed:
			if !ok {
				return
			}
			key := d.ledger.FreedKey(m.Payload)
			d.wake(func(r *resource) bool { return r.ledgerKey == key })
		case <-retry.C:
			now := time.Now()
			d.ledger.FlushRefusals(d.log, now)
			d.wake(func(r *resource) bool {
				return (r.remoteFull && !now.Before(r.remoteFullUntil)) || (r.ledgerRetry && !now.Before(d.ledgerDownUntil))
			})
			if !renewAgain.IsZero() && !now.Before(renewAgain) {
				renewAgain, renewed = d.renewLeases(renewed)
			}
		case <-renew.C:
			renewAgain, renewed = d.renewLeases(renewed)
		}
	}
}

// renewOutcome is how the last renewal (with the liveness mark) ended,
// and what failed since the last one accepted (zero: accepted).
type renewOutcome struct {
	last renewResult
	// unanswered and refused: a renewal since the last one accepted got
	// no answer (an outage), an error reply. Both may have happened: the
	// first renewal accepted tells of each.
	unanswered, refused bool
}

// renewResult is how one renewal ended.
type renewResult uint8

const (
	renewAccepted   renewResult = iota
	renewUnanswered             // Redis did not answer: an outage
	renewRefused                // Redis answered with an error reply
)

// renewLeases renews this edge's leases, puts back (through the returner)
// those the ledger lost, marks the edge live and publishes its waiting
// requests. It returns when to try again sooner than the next TTL/3 tick
// (after ledgerBackoff when the renewal or the liveness mark failed, zero
// when both were accepted) and how it ended. last is how the previous one
// ended: an outage is one warning, not one per retry (two a second for as
// long as Redis is down), and the first renewal accepted after failed
// ones says what ended, an outage, refusals (Redis answered those), or
// both.
//
// The three go in one round trip under one deadline (cluster.Ledger.Tick):
// while it runs the loop wakes no provider whose return was announced, so
// a Redis that does not answer holds the loop up for one timeout, not
// one per call.
func (d *Dispatcher) renewLeases(last renewOutcome) (time.Time, renewOutcome) {
	held, leases := d.heldLeases()
	res := d.ledger.Tick(d.ctx, held, d.pendingByModel())
	if len(res.Missing) > 0 {
		d.readd(res.Missing, leases)
	}
	// The liveness mark tells whether Redis answers when there was
	// nothing to renew. Its reply lost makes the tick an outage, also
	// after renewals Redis refused: the round trip's rest went
	// unanswered, and an outage is told at once, not at the next tick.
	// The pending figures, last in the round trip, only inform the other
	// edges' status views: their reply alone lost is logged below, and
	// the next tick tells whether Redis still answers.
	err, refused := res.Renew, false
	switch {
	case err == nil:
		err = res.Alive
	case d.ctx.Err() == nil && errors.Is(res.Alive, cluster.ErrUnavailable) && !errors.Is(err, cluster.ErrUnavailable):
		// Renewals refused, the liveness mark's reply lost.
		d.ledger.NoteRefused(d.log, cluster.RefusedRenew, err)
		err, refused = res.Alive, true
	}
	if err != nil {
		again := time.Now().Add(ledgerBackoff)
		switch {
		case d.ctx.Err() != nil:
			return again, last
		case errors.Is(err, cluster.ErrRefused):
			// Redis answered: no outage. The leases stay with their
			// requests (the nodes' gates still bound the backends);
			// retried as after an outage, warned of once a minute.
			d.ledger.NoteRefused(d.log, cluster.RefusedRenew, err)
			return again, renewOutcome{last: renewRefused, unanswered: last.unanswered, refused: true}
		case last.last == renewUnanswered:
			d.log.Debug("cluster lease renewal failed", zap.Error(err))
		default:
			// Also right after refusals: Redis answered those, and
			// this is an outage of its own.
			d.log.Warn("cluster lease renewal failed", zap.Error(err))
		}
		return again, renewOutcome{last: renewUnanswered, unanswered: true, refused: last.refused || refused}
	}
	if last.unanswered {
		d.log.Info("cluster lease renewal answers again")
	}
	if last.refused {
		d.log.Info("cluster ledger accepts lease renewals again")
	}
	if res.Pending != nil && d.ctx.Err() == nil {
		d.log.Debug("cluster pending not published", zap.Error(res.Pending))
	}
	return time.Time{}, renewOutcome{}
}

// readd queues OpReadd for the leases the ledger lost (by key, as Renew
// reports them) that this edge still holds. Checked and queued under d.mu,
// as releases queue their returns: a lease released before this check is
// not put back, and the return of one released after it is queued, and
// sent, after its OpReadd. leases maps the reported ids to their leases.
func (d *Dispatcher) readd(missing map[string][]string, leases map[string]*Lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		// Past Close returns are sent by sendLate, unordered with what
		// the returner still holds: nothing is put back any more.
		return
	}
	n, dropped := 0, 0
	for key, ids := range missing {
		for _, id := range ids {
			l := leases[id]
			if l == nil || l.released {
				continue
			}
			select {
			case d.returns <- cluster.Update{Kind: cluster.OpReadd, Key: key, ID: id, Long: l.Long}:
				n++
			default:
				dropped++ // found missing again at the next renewal
			}
		}
	}
	if n+dropped > 0 {
		d.log.Warn("cluster leases this edge holds were missing from the ledger (expired while Redis did not answer, or Redis lost its data); putting them back",
			zap.Int("leases", n), zap.Int("queue_full", dropped))
	}
}

// wake clears remoteFull and ledgerRetry on the matching resources and
// hands their slots to waiters. match is called with d.mu held.
func (d *Dispatcher) wake(match func(*resource) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.resources {
		if match(r) {
			r.wakes++
			r.remoteFull, r.ledgerRetry = false, false
			d.pumpLocked(r)
		}
	}
}

// heldLeases lists this edge's ledger leases by key, and the leases by
// ledger id (for readd).
func (d *Dispatcher) heldLeases() (map[string][]cluster.HeldLease, map[string]*Lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out, byID := map[string][]cluster.HeldLease{}, map[string]*Lease{}
	for _, r := range d.resources {
		for l := range r.leases {
			if l.ledgerID != "" {
				out[r.ledgerKey] = append(out[r.ledgerKey], cluster.HeldLease{ID: l.ledgerID, Long: l.Long})
				byID[l.ledgerID] = l
			}
		}
	}
	return out, byID
}

// handOn is one queued grant in flight: a slot of r reserved for waiter
// w while its ledger slot is taken with d.mu released (see handOnLocked).
type handOn struct {
	r     *resource
	w     *waiter
	gen   uint64 // r's generation when the slot was reserved
	wakes uint64 // r.wakes then
	id    string // the ledger lease id
	// What the ledger needs of r, read under the lock (a reload may
	// change r's spec meanwhile).
	capacity, longCapacity int
}

// handOnLocked hands one of r's free slots to waiter w, the one pumpLocked
// chose: the slot is reserved locally (r's counts, so that no other grant
// takes it), w is marked granting (pumpLocked passes it over; it keeps its
// place and may still give up), and the ledger slot is taken on a
// goroutine with the lock released, so that a slow Redis delays w, not
// every call of the edge.
func (d *Dispatcher) handOnLocked(r *resource, w *waiter) {
	w.granting = true
	r.inFlight++
	if w.long {
		r.longInFlight++
	}
	h := handOn{r: r, w: w, gen: r.gen, wakes: r.wakes, id: d.ledger.NewLeaseID(), capacity: r.spec.Capacity, longCapacity: r.spec.LongCapacity}
	d.wg.Add(1)
	d.takes.Add(1)
	// Owner: the Dispatcher (Close waits for d.wg). Stops after one
	// ledger call, bounded by the ledger's timeout. No hand-on starts
	// once Close has cancelled d.ctx (pumpLocked).
	go func() {
		defer d.wg.Done()
		defer d.takes.Done()
		d.handOn(h)
	}()
}

// handOn takes h's ledger slot and, with the lock held again, undoes the
// reservation and grants the lease if the waiter still waits and the
// resource is still the one reserved. A cluster with no free slot (or an
// older waiter of another edge owed it) marks r remoteFull; a Redis that
// does not answer marks it ledgerRetry: the waiter keeps its place, and the
// cluster loop pumps r again.
func (d *Dispatcher) handOn(h handOn) {
	r, w := h.r, h.w
	kind := queueOf(w.long, w.tunnel)
	out, err := d.ledger.TakeFor(d.ctx, r.ledgerKey, h.capacity, h.longCapacity, w.long, h.id,
		cluster.WaitKey(w.model.name, kind), cluster.PinWaitKey(r.ledgerKey, kind), w.member, time.Duration(w.prio)*PriorityStep, time.Since(w.arrived))
	d.mu.Lock()
	defer d.mu.Unlock()
	w.granting = false
	// The reservation counts only while the generation it was made in
	// lives (activation resets the counts).
	if r.live && r.gen == h.gen {
		r.inFlight--
		if w.long {
			r.longInFlight--
		}
	}
	var c *candidate
	if w.qelem != nil && r.live && r.gen == h.gen && d.resources[r.key] == r && d.models[w.model.name] == w.model {
		c = w.model.candidateFor(r)
	}
	switch {
	case errors.Is(err, cluster.ErrWrongType):
		w.racedFull = 0
		d.wrongTypeLocked(r, err)
		d.offerOthersLocked(w, r)
		return
	case err != nil:
		// Also at Close: the take may have run in Redis all the same.
		d.returnLostTakeLocked(r, h.id, err)
		if d.ctx.Err() == nil {
			d.ledgerDownUntil = time.Now().Add(ledgerBackoff)
			r.ledgerRetry = true
			if errors.Is(err, cluster.ErrRefused) {
				d.ledger.NoteRefused(d.log, cluster.RefusedTake, err)
			}
			d.log.Debug("queued grant deferred", zap.Error(err))
			d.offerOthersLocked(w, r) // marked for the retry tick
		}
		return
	case out == cluster.Full && r.wakes != h.wakes && w.racedFull < maxRacedFull:
		// A return was announced during the round trip: the slot may
		// be free now. Try again rather than wait for the next wake.
		w.racedFull++
		d.pumpLocked(r)
		return
	case out != cluster.Taken:
		w.racedFull = 0
		r.remoteFull, r.remoteFullUntil = true, time.Now().Add(retryRemoteFull)
		if out == cluster.Full {
			// (After a Yield the other providers would yield alike.)
			d.offerOthersLocked(w, r)
		}
		return
	case c == nil || !r.fitsHere(w.long) || !r.serves(w.tunnel):
		// The waiter gave up (or was failed), or the resource changed
		// (a new generation, whose activation passed the waiter over
		// while it was being granted): the ledger slot goes back and the
		// local one to the next waiter, w included, now rather than at
		// the return's announcement, which pub/sub may drop. Not when a
		// reload replaced w's model: w is then the old model's to settle.
		d.returnLocked(r, h.id)
		if w.qelem == nil || d.models[w.model.name] == w.model {
			d.pumpLocked(r)
		}
		d.offerOthersLocked(w, r)
		return
	}
	l := d.grantLocked(w.model, c, w.long, w.session, w.hashes, h.id)
	d.removeWaiterLocked(w)
	w.result <- waitResult{lease: l}
}

// offerOthersLocked pumps the providers of w's model other than r, after a
// hand-on of r to w ended without a lease while w still waits: a provider
// freed during the round trip passed w over (it was being granted), and
// nothing else may wake it again (its announcement is spent, it was not
// marked full), which would leave w queued beside a free slot until its
// timeout. Each pump hands the slot to the oldest waiter that fits, w or
// another.
func (d *Dispatcher) offerOthersLocked(w *waiter, r *resource) {
	if w.qelem == nil || d.models[w.model.name] != w.model {
		return
	}
	for i := range w.model.cands {
		if o := w.model.cands[i].res; o != r && o.fits(w.long) && o.serves(w.tunnel) {
			d.pumpLocked(o)
		}
	}
}

// errRetryPick: the resource changed while its ledger slot was being
// taken (fenced, removed, reloaded); pick again. errRacedFull: the ledger
// said Full while a return was announced; pick again (at most
// maxRacedFull times for one request, one hand-on after another for one
// waiter).
var (
	errRetryPick = errors.New("dispatch: pick again")
	errRacedFull = fmt.Errorf("%w: a return was announced during the take", errRetryPick)
)

const maxRacedFull = 2

// grantClusterLocked grants c to a request not queued, taking its ledger
// slot with d.mu released, so that fresh requests do not queue behind one
// another's Redis round trips: the slot is reserved locally first (no
// other grant can hand it out meanwhile), the reservation is undone after
// the round trip, and the grant is made only if the resource is still the
// one picked. Called and returning with d.mu held.
//
// racedFull is how many times this request was already told to pick again
// because a Full raced an announcement: past maxRacedFull such a Full is
// taken as it is, so that a request facing a full, busy cluster queues
// (and is handed a slot) instead of spending a round trip per
// announcement.
func (d *Dispatcher) grantClusterLocked(m *model, c *candidate, long bool, req Request, hashes []uint64, racedFull int) (*Lease, error) {
	r, kind := c.res, queueOf(long, req.NeedsTunnel)
	if d.ctx.Err() != nil {
		// Close ran during an earlier round trip of this request: no
		// take starts once the returner may have sent its last batch.
		return nil, ErrDispatcherShutdown
	}
	if now := time.Now(); now.Before(d.ledgerDownUntil) {
		return nil, ErrClusterUnavailable
	}
	gen, wakes := r.gen, r.wakes
	r.inFlight++
	if long {
		r.longInFlight++
	}
	id := d.ledger.NewLeaseID()
	// A reload may change r's spec once the lock is released.
	capacity, longCapacity := r.spec.Capacity, r.spec.LongCapacity
	d.takes.Add(1)
	defer d.takes.Done() // after the return below is queued, d.mu held
	d.mu.Unlock()
	out, err := d.ledger.TakeFor(d.ctx, r.ledgerKey, capacity, longCapacity, long, id,
		cluster.WaitKey(m.name, kind), cluster.PinWaitKey(r.ledgerKey, kind), "", time.Duration(req.Priority)*PriorityStep, 0)
	d.mu.Lock()
	// The reservation counts only while the generation it was made in
	// lives (activation resets the counts).
	if r.live && r.gen == gen {
		r.inFlight--
		if long {
			r.longInFlight--
		}
	}
	// A reload may have rebuilt the model's candidates meanwhile: find
	// r's again rather than trust c.
	var same *candidate
	if r.live && r.gen == gen && d.resources[r.key] == r && d.models[m.name] == m {
		same = m.candidateFor(r)
	}
	switch {
	case errors.Is(err, cluster.ErrWrongType):
		d.wrongTypeLocked(r, err)
		return nil, nil // as for Full: the next candidate
	case err != nil:
		// Also at Close: the take may have run in Redis all the same.
		// Also when refused: a script refused part-way keeps its writes.
		d.returnLostTakeLocked(r, id, err)
		if d.ctx.Err() != nil {
			// Close cut the round trip short: Redis is not the cause.
			return nil, ErrDispatcherShutdown
		}
		// A refusal (out of memory, a read-only replica, loading)
		// refuses every grant alike: answered as an outage, and backed
		// off from, but warned of as what it is.
		if errors.Is(err, cluster.ErrRefused) {
			d.ledger.NoteRefused(d.log, cluster.RefusedTake, err)
		}
		d.ledgerDownUntil = time.Now().Add(ledgerBackoff)
		return nil, fmt.Errorf("%w: %w", ErrClusterUnavailable, err)
	case out == cluster.Yield:
		r.remoteFull, r.remoteFullUntil = true, time.Now().Add(retryRemoteFull)
		return nil, errYield
	case out == cluster.Full && r.wakes != wakes && racedFull < maxRacedFull:
		// A return was announced during the round trip (see
		// resource.wakes): pick again.
		return nil, errRacedFull
	case out == cluster.Full:
		r.remoteFull, r.remoteFullUntil = true, time.Now().Add(retryRemoteFull)
		return nil, nil
	case d.ctx.Err() != nil:
		// Close ran during the round trip: no lease is granted after
		// it, whose return would come after the returner's last batch.
		d.returnLocked(r, id)
		return nil, ErrDispatcherShutdown
	case same == nil || !r.fitsHere(long) || !r.serves(req.NeedsTunnel):
		d.returnLocked(r, id)
		return nil, errRetryPick
	}
	return d.grantLocked(m, same, long, req.SessionID, hashes, id), nil
}

// waitLocked gives a new waiter its place in the cluster's wait set: the
// registration is queued for the returner (never blocks: on a full queue
// the waiter only loses its claim to fairness across edges).
func (d *Dispatcher) waitLocked(w *waiter, age time.Duration) {
	w.member = d.ledger.NewWaiterID(time.Duration(w.prio) * PriorityStep)
	d.queueWaitOpLocked(cluster.Update{Kind: cluster.OpWait, Key: waitKeyOf(w), ID: w.member, Age: age})
}

// waitKeyOf is the cluster wait set w registers in: its provider's pinned
// one while it is pinned (pinned.go), else its model's.
func waitKeyOf(w *waiter) string {
	kind := queueOf(w.long, w.tunnel)
	if w.pin != nil {
		return cluster.PinWaitKey(w.pin.ledgerKey, kind)
	}
	return cluster.WaitKey(w.model.name, kind)
}

// queueWaitOpLocked queues a waiter's registration or removal while the
// queue holds fewer than waitQueue updates, else drops it (a dropped
// removal ages out of the set, see cluster.MaxYield). Senders hold d.mu,
// so the length read cannot be overtaken by another sender.
func (d *Dispatcher) queueWaitOpLocked(op cluster.Update) {
	if len(d.returns) >= waitQueue {
		return
	}
	select {
	case d.returns <- op:
	default:
	}
}

// unwaitLocked queues w's removal from its wait set.
func (d *Dispatcher) unwaitLocked(w *waiter) {
	d.queueWaitOpLocked(cluster.Update{Kind: cluster.OpUnwait, Key: waitKeyOf(w), ID: w.member})
}

// returnLocked queues a ledger return (never blocks: on a full queue the
// lease expires within the TTL). After Close, when the returner may have
// sent its last batch, a goroutine sends it (sendLate).
func (d *Dispatcher) returnLocked(r *resource, id string) {
	d.queueReturnLocked(r, cluster.Update{Kind: cluster.OpReturn, Key: r.ledgerKey, ID: id})
}

// queueReturnLocked is returnLocked for the return op of r's lease.
func (d *Dispatcher) queueReturnLocked(r *resource, op cluster.Update) {
	select {
	case d.returns <- op:
	default:
		d.log.Warn("cluster return queue full; the lease expires within the TTL", zap.String("key", r.ledgerKey))
	}
	if d.ctx.Err() != nil && !d.ledger.Go(d.sendLate) {
		// The ledger is closed: the edge is stopping.
		d.log.Debug("cluster ledger closed; a lease released after it expires within the TTL", zap.String("key", r.ledgerKey))
	}
}

// sendLate sends the returns queued after Close: a lease granted before
// Close whose request ended after it (an edge's drain that ran out, a
// node lost at shutdown) would otherwise keep its slot taken in every
// edge's count for the lease TTL. It runs on a goroutine of the ledger
// (cluster.Ledger.Go: closing the ledger waits for it, Close does not),
// one per return; one that finds the queue emptied by another ends at
// once. It first waits for the dispatcher's goroutines (they all end
// promptly once Close has cancelled d.ctx): the returner's last batch may
// hold a lease's OpReadd, which this lease's return must not overtake. No
// goroutine adds to d.wg once d.ctx is done. Every return it sends is
// fenced (see flushReturns): that OpReadd may have gone unanswered, and
// still reach Redis after the return. Its sends stop at
// CloseFlush; a ledger closed meanwhile (Close waits cluster.CloseWait at
// most) fails them at once.
func (d *Dispatcher) sendLate() {
	d.wg.Wait()
	d.flushReturns(nil, nil, 0)
}

// wrongTypeLocked passes r over as if the cluster held its slots (until
// retryRemoteFull has passed): a ledger key holds another program's value,
// which only an operator can remove. Redis does answer, so the other
// providers are granted as usual (no ledgerBackoff) and a request goes to
// another candidate or queues.
func (d *Dispatcher) wrongTypeLocked(r *resource, err error) {
	r.remoteFull, r.remoteFullUntil = true, time.Now().Add(retryRemoteFull)
	d.log.Warn("cluster ledger key holds a value of another type; the provider is not granted until it is removed",
		zap.String("node_id", r.key.node), zap.String("provider", r.key.provider), zap.Error(err))
}

// returnLostTakeLocked gives back the ledger slot of a take that failed
// without an answer: the script may have run in Redis and only its answer
// been lost (a Redis slower than the timeout, a connection cut after the
// command), and that slot, held by no lease of this edge, is never renewed
// but would stay taken for the whole TTL. A return of an id the ledger
// does not hold removes nothing, and is not announced (it wakes no edge).
//
// err is the take's failure. One unanswered (ErrUnavailable, Close's
// cancellation included) may also not have reached Redis yet (its bytes
// held in a socket buffer or a stalled network while the return goes out
// on another connection): that return is fenced, so that the take, run
// after it, finds its id marked returned and takes nothing (take.lua);
// the mark costs one key for the TTL. A refused take was answered, and
// nothing of it is on its way: its return is plain, so that a Redis out
// of memory, which refuses the mark, still removes what the take wrote.
func (d *Dispatcher) returnLostTakeLocked(r *resource, id string, err error) {
	d.queueReturnLocked(r, cluster.Update{Kind: cluster.OpReturn, Key: r.ledgerKey, ID: id, Fence: errors.Is(err, cluster.ErrUnavailable)})
}

// pendingByModel is this edge's waiting requests by model.
func (d *Dispatcher) pendingByModel() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for name, m := range d.models {
		if m.pending > 0 {
			out[name] = m.pending
		}
	}
	return out
}

// ClusterStatus is the whole cluster's occupancy as the ledger records it.
type ClusterStatus struct {
	// Reachable is false while Redis does not answer (the figures are
	// then absent).
	Reachable bool `json:"reachable"`
	// InFlight is the leases every edge together holds, by
	// "node/provider".
	InFlight map[string]int `json:"in_flight,omitempty"`
	// Pending is the requests waiting on every edge, by model (as the
	// edges last published them, every TTL/3).
	Pending map[string]int `json:"pending,omitempty"`
}

// Cluster returns the cluster's status, or nil without a ledger: one
// call of the ledger (cluster.Ledger.Status, one round trip) under one
// deadline, cluster.redis.timeout_ms, however many resources and edges
// there are to read.
func (d *Dispatcher) Cluster(ctx context.Context) *ClusterStatus {
	if d.ledger == nil {
		return nil
	}
	keys, names := d.ledgerKeys()
	held, pending, err := d.ledger.Status(ctx, keys)
	if err != nil {
		return &ClusterStatus{}
	}
	return &ClusterStatus{Reachable: true, InFlight: byName(held, names), Pending: pending}
}

// ClusterHeld is the number of leases the whole cluster holds on each
// provider ("node/provider"), from the ledger; nil without one.
func (d *Dispatcher) ClusterHeld(ctx context.Context) (map[string]int, error) {
	if d.ledger == nil {
		return nil, nil
	}
	keys, names := d.ledgerKeys()
	held, err := d.ledger.Held(ctx, keys)
	if err != nil {
		return nil, err
	}
	return byName(held, names), nil
}

// ledgerKeys lists the ledger keys of the resources, and their names
// ("node/provider") by key.
func (d *Dispatcher) ledgerKeys() ([]string, map[string]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := make([]string, 0, len(d.resources))
	names := make(map[string]string, len(d.resources))
	for k, r := range d.resources {
		keys = append(keys, r.ledgerKey)
		names[r.ledgerKey] = k.node + "/" + k.provider
	}
	return keys, names
}

// byName maps counts by ledger key to counts by name.
func byName(held map[string]int, names map[string]string) map[string]int {
	out := make(map[string]int, len(held))
	for k, n := range held {
		out[names[k]] = n
	}
	return out
}
