package dispatch

import (
	"container/list"
	"time"
)

// Pinned waiters. A Responses follow-up (Request.PreviousResponseID) is
// sent to the provider that answered its previous response: servers such
// as vLLM keep stored responses in one serving process's memory and answer
// any other provider's follow-up 404. When that provider is full, the
// follow-up waits for it (a pinned waiter) rather than going to another
// candidate, which could only answer the 404:
//   - a pinned waiter is granted only a slot of its provider, in queue order
//     with the ordinary waiters that provider could serve (waiter.before:
//     arrival, priority), from the pump of that provider (pumpLocked);
//   - it lives in a list of its own (model.pinned, by provider and kind),
//     so that a freed other provider never walks it: an ordinary waiter is
//     not held up behind waiters pinned elsewhere;
//   - it counts in its model's queue like any waiter (max_queue, pending,
//     queue timeout, caller's deadline and cancellation: Acquire's wait is
//     the same);
//   - once its provider cannot serve it any more (node lost or superseded,
//     provider removed or no longer a candidate of the model, draining or
//     offline, no slot of its kind left), it is made ordinary
//     (unpinStaleLocked), merged into its model's queue by its order, and
//     the model's candidates are pumped: a free one serves it at once.
//
// Cluster mode (a ledger) pins too, with the shared wait sets' fairness
// across edges kept: a pinned waiter registers in its provider's pinned
// wait set (cluster.PinWaitKey, per provider and kind) rather than its
// model's. Every take of that provider, by any edge, yields to an older
// waiter of another edge in either set, so a slot of the provider goes to
// the oldest waiter that can use it, pinned or not; a take of another
// provider never yields to a waiter pinned elsewhere (registered in the
// model's set, it would hold each such slot back for up to
// cluster.MaxYield, though it could not use it). Unpinned, a waiter moves
// to its model's set, keeping its arrival. A pick whose take on the
// remembered provider yields to another edge's older waiter pins the
// request there too (waitAfterYieldLocked), rather than queue it for any
// candidate.

// pinForLocked is the provider a request that finds no candidate with
// room waits for, or nil when it waits for any: the provider that
// answered its previous response, while that is a live, servable
// candidate of m that could take a request of this kind and the request
// does not avoid it (a failover from it). A request that must not queue
// (NoWait) pins nothing: it is routed as if it named no response.
func (d *Dispatcher) pinForLocked(m *model, long, tunnel bool, req *Request) *resource {
	if req.PreviousResponseID == "" || req.NoWait {
		return nil
	}
	key, ok := d.responses.get(req.PreviousResponseID)
	if !ok || avoided(req.Avoid, key) {
		return nil
	}
	r := d.resources[key]
	if r == nil || !d.pinHoldsLocked(m, r, long, tunnel) {
		return nil
	}
	return r
}

// waitAfterYieldLocked is the provider a request whose take on c yielded
// to another edge's older waiter waits for: c, when c is the provider
// that answered its previous response (pinForLocked), else nil.
func (d *Dispatcher) waitAfterYieldLocked(m *model, c *candidate, long, tunnel bool, req *Request) *resource {
	if pin := d.pinForLocked(m, long, tunnel, req); pin != nil && pin == c.res {
		return pin
	}
	return nil
}

// pinHoldsLocked reports whether r can still serve m's waiters of this
// kind pinned to it, now or once a slot frees: the model and the resource
// are the current ones, r is one of m's candidates, live, not draining,
// offline or closing, and has slots of the kind.
func (d *Dispatcher) pinHoldsLocked(m *model, r *resource, long, tunnel bool) bool {
	return d.models[m.name] == m && d.resources[r.key] == r && r.live && !unservable(r.health) && !r.dying() &&
		r.couldTake(long, tunnel) && r.serves(tunnel) && m.candidateFor(r) != nil
}

// enqueueLocked puts a new waiter in its model's queue of its kind, or,
// pinned to pin (non-nil), in the model's list of waiters pinned to pin.
func (d *Dispatcher) enqueueLocked(w *waiter, pin *resource) {
	m, kind := w.model, queueOf(w.long, w.tunnel)
	w.queue = m.queues[kind]
	if pin != nil {
		k := pinKey{pin, kind}
		if m.pinned == nil {
			m.pinned = map[pinKey]*list.List{}
		}
		if m.pinned[k] == nil {
			m.pinned[k] = list.New()
		}
		w.pin, w.queue = pin, m.pinned[k]
	}
	w.qelem = insertWaiter(w.queue, w)
	m.pending++
}

// unpinStaleLocked makes ordinary every waiter pinned to a provider that
// cannot serve it any more (pinHoldsLocked), and pumps the candidates of
// the models whose waiters it unpinned: one with room serves them now, not
// at its next release. Every step that can take a provider from its pinned
// waiters calls it (a node's transition, a health report, a reload or an
// applied refresh through failStrandedLocked). It costs O(models) when
// nobody is pinned, O(lists of pinned waiters) otherwise, and the merge
// O(waiters of the model) per list unpinned.
//
// Every model is unpinned before any provider is pumped: models share
// providers, and a pump while another model's waiters are still pinned to
// a provider that is gone would pass them over for younger waiters.
func (d *Dispatcher) unpinStaleLocked() {
	var moved []*model // nil unless a list is unpinned: no allocation
	for _, m := range d.models {
		if len(m.pinned) == 0 {
			continue
		}
		n := len(moved)
		for k, q := range m.pinned {
			if !d.pinHoldsLocked(m, k.res, kindLong(k.kind), kindTunnel(k.kind)) {
				d.unpinLocked(m, k, q)
				if len(moved) == n {
					moved = append(moved, m)
				}
			}
		}
	}
	for _, m := range moved {
		for i := range m.cands {
			d.pumpLocked(m.cands[i].res)
		}
	}
}

// unpinLocked merges q, m's waiters pinned by k, into m's queue of k's
// kind by their order (both lists are in order: one pass), and drops q.
// With a ledger each registers in its model's wait set, as an ordinary
// waiter does when it queues.
func (d *Dispatcher) unpinLocked(m *model, k pinKey, q *list.List) {
	dst := m.queues[k.kind]
	at := dst.Front()
	for e := q.Front(); e != nil; e = q.Front() {
		w := q.Remove(e).(*waiter)
		if d.ledger != nil && w.member != "" {
			d.unwaitLocked(w) // from the pinned set, while w.pin names it
		}
		for at != nil && at.Value.(*waiter).before(w) {
			at = at.Next()
		}
		if at == nil {
			w.qelem = dst.PushBack(w)
		} else {
			w.qelem = dst.InsertBefore(w, at)
		}
		w.queue, w.pin = dst, nil
		if d.ledger != nil {
			d.waitLocked(w, time.Since(w.arrived)) // in the model's, keeping its place
		}
	}
	delete(m.pinned, k)
}
