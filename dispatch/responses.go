package dispatch

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/dispatch/cluster"
)

// Bounds of the edge's memory of which provider answered which Responses
// API response (RememberResponse). With a cluster ledger the ids are also
// shared with the other edges through Redis (see responseShare), so a
// follow-up that reaches another edge than the one that relayed its
// previous response still goes to the provider that holds it.
const (
	// MaxRememberedResponses is how many response ids are remembered at
	// most; past it the oldest is forgotten first.
	MaxRememberedResponses = 10000
	// RememberedResponseTTL is how long a response id is remembered, here
	// and in Redis.
	RememberedResponseTTL = time.Hour
	// MaxResponseIDBytes is the longest response id remembered (vLLM's
	// are 37 bytes, "resp_" and 32 hex digits; OpenAI's about 50): a
	// longer one is not, so an entry costs a bounded few hundred bytes.
	// A follow-up naming a longer one is never looked up in Redis.
	MaxResponseIDBytes = 128
)

const (
	// responseShareQueue bounds the ids waiting to be written to Redis:
	// past it an id is not shared (iop_response_ids_unshared_total,
	// logged at debug), as when Redis is down; this edge still
	// remembers it.
	responseShareQueue = 1024
	// responseShareBatch bounds the ids written in one round trip.
	responseShareBatch = 128
)

// responseShare writes the ids this edge remembers to the cluster ledger,
// off the request path: RememberResponse queues, one goroutine of the
// Dispatcher writes. Set in New when a ledger is configured, else nil.
type responseShare struct {
	q chan shareItem
	// Counts, for tests and debug logs: ids dropped because the queue was
	// full, and written batches that failed.
	dropped, failed atomic.Uint64
	// failing is set while the last batch written failed: answers do not
	// wait for their ids' writes then (AwaitShared), or Redis down would
	// hold each answer for the ledger's timeout.
	failing atomic.Bool
	// owners is the writer's scratch space (one goroutine: the writer,
	// then shareLast on it).
	owners []cluster.ResponseOwner
	// stopped is set, under the Dispatcher's mu, once the writer wrote
	// its last batch (shareStopped): ids learnt from then on (answers that
	// ended after the edge's drain) are counted unshared, not queued for
	// a writer that is gone.
	stopped bool
}

// shareItem is an id queued for Redis and the channel closed once the
// write that carried it ended, taken or failed, or at the writer's end
// for an id it never wrote (shareStopped).
type shareItem struct {
	owner cluster.ResponseOwner
	done  chan struct{}
}

// startResponseShare starts the writer of the ids shared through the
// ledger.
func (d *Dispatcher) startResponseShare() {
	d.shareResp = &responseShare{q: make(chan shareItem, responseShareQueue)}
	d.wg.Add(1)
	// Owner: the Dispatcher. Stops when Close cancels d.ctx, once it
	// has written the ids still queued then (shareLast).
	go func() {
		defer d.wg.Done()
		d.shareResponses(d.shareResp)
	}()
}

// shareResponses writes the queued ids in batches of up to
// responseShareBatch, each round trip bounded by the ledger's timeout. A
// batch that fails is not sent again: it only costs follow-ups reaching
// other edges their pin, and Redis down costs them more than that.
func (d *Dispatcher) shareResponses(s *responseShare) {
	defer d.shareStopped(s)
	batch := make([]shareItem, 0, responseShareBatch)
	for d.ctx.Err() == nil {
		select {
		case <-d.ctx.Done():
		case it := <-s.q:
			batch = fillShare(s.q, append(batch[:0], it))
			if !s.write(context.WithoutCancel(d.ctx), d, batch) && d.ctx.Err() != nil {
				return // failed at Close: no batch after it (see shareLast)
			}
		}
	}
	d.shareLast(s, batch)
}

// fillShare appends to batch the ids queued, up to responseShareBatch.
func fillShare(q <-chan shareItem, batch []shareItem) []shareItem {
	for len(batch) < responseShareBatch {
		select {
		case it := <-q:
			batch = append(batch, it)
		default:
			return batch
		}
	}
	return batch
}

// write sends one batch in ctx, which Close does not cancel (the
// ledger's timeout bounds the batch): a batch cut off mid-send would lose
// ids that the edge's drain just answered, whose follow-ups reach other
// edges once this one is gone. It reports whether Redis took the batch,
// and then releases the answers waiting for it (AwaitShared).
func (s *responseShare) write(ctx context.Context, d *Dispatcher, batch []shareItem) bool {
	s.owners = s.owners[:0]
	for i := range batch {
		s.owners = append(s.owners, batch[i].owner)
	}
	err := d.ledger.RememberResponses(ctx, s.owners, RememberedResponseTTL)
	s.failing.Store(err != nil)
	if err != nil {
		n := s.failed.Add(1)
		d.metrics.responseIDsUnshared(unsharedWriteFailed, len(batch))
		d.log.Debug("response ids not shared with the cluster", zap.Int("ids", len(batch)), zap.Uint64("failed_batches", n), zap.Error(err))
	}
	for i := range batch {
		close(batch[i].done)
		batch[i] = shareItem{}
	}
	return err == nil
}

// shareLast writes, at Close, the ids queued until then: those of the
// answers the edge's drain relayed last (Edge.Close closes the dispatcher
// after the HTTP drain). At most responseShareQueue/responseShareBatch
// round trips, within CloseFlush as the returner's last batches, and none
// after one fails: Redis down delays Close by one ledger timeout, not one
// per batch.
func (d *Dispatcher) shareLast(s *responseShare, batch []shareItem) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), CloseFlush)
	defer cancel()
	for range responseShareQueue/responseShareBatch + 1 {
		batch = fillShare(s.q, batch[:0])
		if len(batch) == 0 || !s.write(ctx, d, batch) {
			return
		}
	}
}

// shareStopped ends the writer: no id is queued from now on, and those
// still queued (behind a batch that failed, or past the last one) are
// counted unshared and their waiters released.
func (d *Dispatcher) shareStopped(s *responseShare) {
	d.mu.Lock()
	s.stopped = true
	d.mu.Unlock()
	for n := 0; ; n++ {
		select {
		case it := <-s.q:
			close(it.done)
		default:
			if n > 0 {
				d.metrics.responseIDsUnshared(unsharedStopped, n)
				d.log.Debug("response ids not shared with the cluster: the edge stopped", zap.Int("ids", n))
			}
			return
		}
	}
}

// RememberResponse records that the provider l is on answered the
// Responses API response id, so that a follow-up naming it
// (Request.PreviousResponseID) is sent there. An empty id, or one longer
// than MaxResponseIDBytes, is not remembered. Only ids an upstream
// answered are recorded, never one a client sent: a client cannot point
// another's follow-ups anywhere, and the memory stays bounded by
// MaxRememberedResponses whatever clients send. With a cluster ledger
// the id is also queued for Redis (never waiting: see responseShare).
//
// An id remembered for another provider keeps it (until its TTL): ids are
// unique, so a second provider answering one is broken or hostile, e.g. an
// upstream echoing the previous_response_id of a follow-up that reached
// it, which would otherwise take the conversation's later follow-ups from
// the provider that holds it. Redis keeps the first answerer the same way
// across edges (SET NX).
//
// shared, when not nil, is closed once the id's write to Redis ended
// (AwaitShared waits for it): an answer held whole is written to its
// client after that, so that a follow-up the client sends at once
// through another edge finds the id there. It is nil without a ledger,
// for an id not queued (not remembered, or the queue full) and while the
// writes fail (Redis down: the id is still queued, and shared once Redis
// answers).
func (d *Dispatcher) RememberResponse(id string, l *Lease) (shared <-chan struct{}) {
	if id == "" || len(id) > MaxResponseIDBytes || l == nil || l.res == nil {
		return nil
	}
	d.mu.Lock()
	key, ok := d.responses.get(id)
	keep := !ok || key == l.res.key
	if keep {
		d.responses.put(id, l.res.key)
	}
	if !keep || d.shareResp == nil {
		d.mu.Unlock()
		return nil
	}
	// Queued under mu, which shareStopped takes: an id either reaches the
	// queue before the writer's end drains it, or sees it stopped.
	s, done, why := d.shareResp, make(chan struct{}), ""
	if s.stopped {
		why = unsharedStopped
	} else {
		select {
		case s.q <- shareItem{owner: cluster.ResponseOwner{ID: id, Key: l.res.ledgerKey}, done: done}:
		default:
			why = unsharedQueueFull
		}
	}
	d.mu.Unlock()
	switch why {
	case unsharedQueueFull:
		n := s.dropped.Add(1)
		d.metrics.responseIDsUnshared(why, 1)
		d.log.Debug("response id not shared with the cluster: queue full", zap.Int("queue", responseShareQueue), zap.Uint64("dropped", n))
		return nil
	case unsharedStopped:
		d.metrics.responseIDsUnshared(why, 1)
		return nil
	}
	if s.failing.Load() {
		return nil
	}
	return done
}

// AwaitShared waits until the write shared stands for
// (RememberResponse's) has ended, ctx ends or the ledger's timeout has
// passed (the write's own bound; the queue ahead of it may take longer);
// it returns at once for a nil shared.
func (d *Dispatcher) AwaitShared(ctx context.Context, shared <-chan struct{}) {
	if shared == nil {
		return
	}
	t := time.NewTimer(d.ledger.Timeout())
	defer t.Stop()
	select {
	case <-shared:
	case <-ctx.Done():
	case <-t.C:
	}
}

// lookupFailed takes note of a lookup that failed while its request was
// still there. Redis not answering is the evidence a failed take is, so
// grants fail at once for ledgerBackoff as after one: else the take of
// the same request waits out the ledger's timeout a second time, and a
// follow-up gets its 503 after twice timeout_ms where any other request
// gets it after once. A refusal does not: the client chose the id, hence
// the key, and one hostile key must not fail everyone's grants.
func (d *Dispatcher) lookupFailed(err error) {
	d.log.Debug("response id not looked up in the cluster", zap.Error(err))
	if !errors.Is(err, cluster.ErrUnavailable) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() == nil { // at Close the ledger's own Close may be the cause
		d.ledgerDownUntil = time.Now().Add(ledgerBackoff)
	}
}

// requestEnded reports whether the request's ctx has ended: cancelled,
// or at its deadline. A read deadline set from that deadline can fire
// before the context's own timer marks it done, so a call it cut short
// may return while ctx.Err() is still nil.
func requestEnded(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// learnResponse looks up in the cluster ledger the provider that answered
// response id when this edge does not know it (another edge relayed it),
// and remembers it here, so that pickLocked sends the follow-up there. At
// most one Redis round trip, bounded by the ledger's timeout and ctx,
// made before Acquire takes d.mu; none without a ledger, for an id over
// MaxResponseIDBytes (it was never recorded), for a model with fewer than
// two candidates (the answer could not change where the request goes:
// cluster mode pins no waiter), or while grants fail at once for a Redis
// that did not answer (ledgerDownUntil). A miss, a refusal or
// a value naming no resource of this edge leaves the request routed as
// usual: it costs the follow-up its pin, never the request. Redis not
// answering the lookup fails grants at once for a while (lookupFailed),
// the request's own included: its take would wait on the same Redis.
//
// A miss is not remembered: a follow-up usually names a fresh id (the
// conversation's last answer), so a negative entry would rarely save a
// round trip, and would hide an id whose write was still on its way for
// as long as it lives.
func (d *Dispatcher) learnResponse(ctx context.Context, model, id string) {
	if d.ledger == nil || id == "" || len(id) > MaxResponseIDBytes {
		return
	}
	d.mu.Lock()
	_, known := d.responses.get(id)
	down := time.Now().Before(d.ledgerDownUntil)
	m := d.models[model]
	choice := m != nil && len(m.cands) > 1
	d.mu.Unlock()
	if known || down || !choice {
		return
	}
	owner, err := d.ledger.ResponseOwner(ctx, id)
	if err != nil {
		if !requestEnded(ctx) {
			d.lookupFailed(err)
		}
		return
	}
	if owner == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.responses.get(id); ok {
		return // answered here meanwhile: this edge's own record stands
	}
	for k, r := range d.resources {
		if r.ledgerKey == owner {
			d.responses.put(id, k)
			return
		}
	}
	d.log.Debug("response id's owner in the cluster is no provider of this edge", zap.Int("owner_bytes", len(owner)))
}
