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
//   - grantLocked takes the ledger slot before counting the lease; a
//     provider the ledger says is full (other edges hold its slots) is
//     marked remoteFull and not offered again until a return is announced
//     or retryRemoteFull passes; one whose queued grant failed because
//     Redis did not answer is marked ledgerRetry and pumped again by the
//     retry tick once the backoff has passed;
//   - a released lease goes back to the ledger from the returner (bounded
//     queue, never under the lock); a return that cannot be made expires
//     within the TTL;
//   - the cluster loop renews this edge's leases every TTL/3, wakes the
//     providers whose return another edge announced (pub/sub), and retries
//     remoteFull providers every retryRemoteFull, so a lost announcement
//     delays a waiter, never strands it;
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

const (
	// retryRemoteFull is how long a provider the ledger called full is
	// left alone when no return announcement arrives.
	retryRemoteFull = 200 * time.Millisecond
	// returnQueue bounds the returns waiting for the returner.
	returnQueue = 4096
	// waitQueue is how much of returnQueue waiters' registrations and
	// removals may fill: a burst of waiters must not crowd out lease
	// returns, whose loss costs the cluster a slot for a TTL (a dropped
	// registration costs only the waiter's claim to fairness).
	waitQueue = returnQueue / 2
	// ledgerBackoff: after a failed grant, grants fail at once for this
	// long instead of each waiting out the Redis timeout under the lock.
	ledgerBackoff = 500 * time.Millisecond
)

// ledgerReturn is a ledger update sent by the returner: a lease return,
// a waiter joining its wait set or a waiter leaving it. One goroutine
// sends them in the order they were queued, under d.mu, so a waiter's
// removal never reaches Redis before its registration (which would leave
// a ghost the other edges yield to for up to cluster.MaxYield).
type ledgerReturn struct {
	op      ledgerOp
	key, id string
	shift   time.Duration // opWait: the waiter's priority shift
}

type ledgerOp uint8

const (
	opReturn ledgerOp = iota
	opWait
	opUnwait
)

// errYield: the ledger owes the slot to an older waiter of another edge.
var errYield = errors.New("dispatch: an older waiter of another edge goes first")

// startCluster starts the returner and the cluster loop (Owner: the
// Dispatcher; both stop when Close cancels d.ctx).
func (d *Dispatcher) startCluster(ttl time.Duration) {
	d.returns = make(chan ledgerReturn, returnQueue)
	d.wg.Add(2)
	// Owner: the Dispatcher. Stops when Close cancels d.ctx.
	go func() {
		defer d.wg.Done()
		d.returner()
	}()
	// Owner: the Dispatcher. Stops when Close cancels d.ctx.
	go func() {
		defer d.wg.Done()
		d.clusterLoop(ttl)
	}()
}

func (d *Dispatcher) returner() {
	for {
		select {
		case <-d.ctx.Done():
			return
		case r := <-d.returns:
			switch r.op {
			case opWait:
				if err := d.ledger.Wait(d.ctx, r.key, r.id, r.shift); err != nil && d.ctx.Err() == nil {
					d.log.Debug("waiter not registered with the cluster", zap.Error(err))
				}
			case opUnwait:
				if err := d.ledger.Unwait(d.ctx, r.key, r.id); err != nil && d.ctx.Err() == nil {
					d.log.Debug("waiter not taken out of the cluster's wait set; it ages out", zap.Error(err))
				}
			default:
				if err := d.ledger.Return(d.ctx, r.key, r.id); err != nil && d.ctx.Err() == nil {
					d.log.Warn("lease not returned to the cluster ledger; it expires within the TTL", zap.String("key", r.key), zap.Error(err))
				}
			}
		}
	}
}

// clusterLoop renews, listens for return announcements and retries
// providers marked full.
func (d *Dispatcher) clusterLoop(ttl time.Duration) {
	sub := d.ledger.Client().Subscribe(d.ctx, cluster.FreedChannel)
	defer sub.Close()
	freed := sub.Channel()
	renew := time.NewTicker(ttl / 3)
	defer renew.Stop()
	_ = d.ledger.Alive(d.ctx)
	retry := time.NewTicker(retryRemoteFull)
	defer retry.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case m, ok := <-freed:
			if !ok {
				return
			}
			d.wake(func(r *resource) bool { return r.ledgerKey == m.Payload })
		case <-retry.C:
			now := time.Now()
			d.wake(func(r *resource) bool {
				return (r.remoteFull && !now.Before(r.remoteFullUntil)) || (r.ledgerRetry && !now.Before(d.ledgerDownUntil))
			})
		case <-renew.C:
			_ = d.ledger.Alive(d.ctx)
			if err := d.ledger.Renew(d.ctx, d.heldLeases()); err != nil && d.ctx.Err() == nil {
				d.log.Warn("cluster lease renewal failed", zap.Error(err))
			}
			if err := d.ledger.SetPending(d.ctx, d.pendingByModel()); err != nil && d.ctx.Err() == nil {
				d.log.Debug("cluster pending not published", zap.Error(err))
			}
		}
	}
}

// wake clears remoteFull and ledgerRetry on the matching resources and
// hands their slots to waiters. match is called with d.mu held.
func (d *Dispatcher) wake(match func(*resource) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.resources {
		if match(r) {
			r.remoteFull, r.ledgerRetry = false, false
			d.pumpLocked(r)
		}
	}
}

// heldLeases lists this edge's ledger ids by key.
func (d *Dispatcher) heldLeases() map[string][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string][]string{}
	for _, r := range d.resources {
		for l := range r.leases {
			if l.ledgerID != "" {
				out[r.ledgerKey] = append(out[r.ledgerKey], l.ledgerID)
			}
		}
	}
	return out
}

// takeLocked claims r's ledger slot for a new lease of a request of
// model m and queue kind (member: its place in the wait set, "" when not
// queued): its id; "" with r marked remoteFull when the cluster has none
// free; errYield (r marked too) when an older waiter of another edge is
// owed it.
func (d *Dispatcher) takeLocked(r *resource, m *model, kind int, member string, prio int) (string, error) {
	if now := time.Now(); now.Before(d.ledgerDownUntil) {
		// Redis just failed: answer at once rather than hold the lock for
		// another timeout on every request.
		r.ledgerRetry = true
		return "", ErrClusterUnavailable
	}
	id := d.ledger.NewLeaseID()
	out, err := d.ledger.Take(d.ctx, r.ledgerKey, r.spec.Capacity, r.spec.LongCapacity, kindLong(kind), id,
		cluster.WaitKey(m.name, kind), member, time.Duration(prio)*PriorityStep)
	if err != nil {
		d.ledgerDownUntil = time.Now().Add(ledgerBackoff)
		// No return announcement will come for the slot this grant
		// wanted (the lease that freed it may never have reached the
		// ledger): the retry tick pumps r again.
		r.ledgerRetry = true
		return "", fmt.Errorf("%w: %w", ErrClusterUnavailable, err)
	}
	switch out {
	case cluster.Taken:
		return id, nil
	case cluster.Yield:
		r.remoteFull, r.remoteFullUntil = true, time.Now().Add(retryRemoteFull)
		return "", errYield
	}
	r.remoteFull, r.remoteFullUntil = true, time.Now().Add(retryRemoteFull)
	return "", nil
}

// errRetryPick: the resource changed while its ledger slot was being
// taken (fenced, removed, reloaded); pick again.
var errRetryPick = errors.New("dispatch: pick again")

// grantClusterLocked grants c to a request not queued, taking its ledger
// slot with d.mu released, so that fresh requests do not queue behind one
// another's Redis round trips: the slot is reserved locally first (no
// other grant can hand it out meanwhile), the reservation is undone after
// the round trip, and the grant is made only if the resource is still the
// one picked. Called and returning with d.mu held.
func (d *Dispatcher) grantClusterLocked(m *model, c *candidate, long bool, req Request, hashes []uint64) (*Lease, error) {
	r, kind := c.res, queueOf(long, req.NeedsTunnel)
	if now := time.Now(); now.Before(d.ledgerDownUntil) {
		return nil, ErrClusterUnavailable
	}
	gen := r.gen
	r.inFlight++
	if long {
		r.longInFlight++
	}
	id := d.ledger.NewLeaseID()
	// A reload may change r's spec once the lock is released.
	capacity, longCapacity := r.spec.Capacity, r.spec.LongCapacity
	d.mu.Unlock()
	out, err := d.ledger.Take(d.ctx, r.ledgerKey, capacity, longCapacity, long, id,
		cluster.WaitKey(m.name, kind), "", time.Duration(req.Priority)*PriorityStep)
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
	case err != nil:
		d.ledgerDownUntil = time.Now().Add(ledgerBackoff)
		return nil, fmt.Errorf("%w: %w", ErrClusterUnavailable, err)
	case out == cluster.Yield:
		r.remoteFull, r.remoteFullUntil = true, time.Now().Add(retryRemoteFull)
		return nil, errYield
	case out == cluster.Full:
		r.remoteFull, r.remoteFullUntil = true, time.Now().Add(retryRemoteFull)
		return nil, nil
	case same == nil || !r.fits(long) || !r.serves(req.NeedsTunnel):
		d.returnLocked(r, id)
		return nil, errRetryPick
	}
	return d.grantLocked(m, same, long, req.SessionID, hashes, kind, "", req.Priority, id)
}

// waitLocked gives a new waiter its place in the cluster's wait set: the
// registration is queued for the returner (never blocks: on a full queue
// the waiter only loses its claim to fairness across edges).
func (d *Dispatcher) waitLocked(w *waiter) {
	w.member = d.ledger.NewWaiterID()
	d.queueWaitOpLocked(ledgerReturn{op: opWait, key: cluster.WaitKey(w.model.name, queueOf(w.long, w.tunnel)), id: w.member, shift: time.Duration(w.prio) * PriorityStep})
}

// queueWaitOpLocked queues a waiter's registration or removal while the
// queue holds fewer than waitQueue updates, else drops it (a dropped
// removal ages out of the set, see cluster.MaxYield). Senders hold d.mu,
// so the length read cannot be overtaken by another sender.
func (d *Dispatcher) queueWaitOpLocked(op ledgerReturn) {
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
	d.queueWaitOpLocked(ledgerReturn{op: opUnwait, key: cluster.WaitKey(w.model.name, queueOf(w.long, w.tunnel)), id: w.member})
}

// returnLocked queues a ledger return (never blocks: on a full queue the
// lease expires within the TTL).
func (d *Dispatcher) returnLocked(r *resource, id string) {
	select {
	case d.returns <- ledgerReturn{op: opReturn, key: r.ledgerKey, id: id}:
	default:
		d.log.Warn("cluster return queue full; the lease expires within the TTL", zap.String("key", r.ledgerKey))
	}
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

// Cluster returns the cluster's status, or nil without a ledger.
func (d *Dispatcher) Cluster(ctx context.Context) *ClusterStatus {
	if d.ledger == nil {
		return nil
	}
	held, err := d.ClusterHeld(ctx)
	if err != nil {
		return &ClusterStatus{}
	}
	pending, err := d.ledger.Pending(ctx)
	if err != nil {
		return &ClusterStatus{}
	}
	return &ClusterStatus{Reachable: true, InFlight: held, Pending: pending}
}

// ClusterHeld is the number of leases the whole cluster holds on each
// provider ("node/provider"), from the ledger; nil without one.
func (d *Dispatcher) ClusterHeld(ctx context.Context) (map[string]int, error) {
	if d.ledger == nil {
		return nil, nil
	}
	d.mu.Lock()
	keys := make([]string, 0, len(d.resources))
	names := make(map[string]string, len(d.resources))
	for k, r := range d.resources {
		keys = append(keys, r.ledgerKey)
		names[r.ledgerKey] = k.node + "/" + k.provider
	}
	d.mu.Unlock()
	held, err := d.ledger.Held(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(held))
	for k, n := range held {
		out[names[k]] = n
	}
	return out, nil
}
