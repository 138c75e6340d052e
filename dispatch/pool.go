package dispatch

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch/route"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

type resKey struct{ node, provider string }

// resource is one (node, provider) dispatch target.
type resource struct {
	key  resKey
	spec config.ProviderSpec // set with setSpec
	// cancelGrace is cancelGraceFrom(the dispatcher's base, spec), worked
	// out when spec is set rather than on every grant.
	cancelGrace time.Duration
	referenced  bool // some model lists it: only then is it dispatched to
	// live is true while the node's ready generation gen owns it.
	live bool
	gen  uint64
	conn *nodewire.Conn
	// downSince is when the resource last stopped being live (its creation
	// for one never live); meaningful only while live is false. The
	// no-provider fast path (models[].offline_grace_sec) reads it.
	downSince time.Time
	// caps is what the provider's adapter declared it can serve, as its
	// node last reported (kept while the node is away; nil until it ever
	// reported, when nothing is known about the provider).
	caps *iop.AdapterCapabilities
	// onNode is true when the config the node runs (node.running, or the
	// edge's config while the node has no session) has this provider:
	// only then may it go live. spec is that config's version of it.
	onNode bool

	inFlight     int
	longInFlight int
	leases       map[*Lease]struct{}
	// models are the models listing this resource as a candidate (each
	// once), rebuilt with the config: the queues pumpLocked looks at.
	models []*model

	// health is the backend health its node last reported (unknown is
	// treated as ok). Reset when the node's generation changes.
	health iop.HealthState
	// load is the backend load its node last reported and loadAt when; a
	// report older than loadStale counts as none.
	load   route.Load
	loadAt time.Time
	// id names the resource in the models' prefix indexes; never reused.
	id uint32
	// ledgerKey is the resource's key in the cluster ledger; remoteFull
	// is set while the ledger says other edges hold every slot (cleared
	// by a return announcement or after remoteFullUntil).
	ledgerKey       string
	remoteFull      bool
	remoteFullUntil time.Time
	// ledgerRetry: a queued grant on the resource failed because Redis did
	// not answer; the cluster loop's retry tick pumps it again (nothing
	// else would: no return is announced for it).
	ledgerRetry bool
	// wakes counts the cluster loop's wakes of the resource (a return
	// announced, a retry): a Full from the ledger whose round trip
	// overlapped one may predate the return, so it is not taken as
	// remoteFull (which only the next wake would clear).
	wakes uint64
}

// setSpec sets the provider's spec and what is derived from it; graceBase
// is the dispatcher's base cancel grace (Options.CancelGrace).
func (r *resource) setSpec(ps *config.ProviderSpec, graceBase time.Duration) {
	r.spec = *ps
	r.cancelGrace = cancelGraceFrom(graceBase, r.spec)
}

// fits reports whether the resource has a slot for a request now.
func (r *resource) fits(long bool) bool {
	// remoteFull: the cluster's other edges hold its slots.
	return !r.remoteFull && r.fitsHere(long)
}

// fitsHere is fits as far as this edge's own state goes. A grant whose
// ledger take answered Taken checks this: the ledger counted its lease,
// so a Full answered to another grant during the same round trip (which
// set remoteFull) does not undo it.
func (r *resource) fitsHere(long bool) bool {
	if !r.live || !r.referenced || unservable(r.health) || r.inFlight >= r.spec.Capacity || r.dying() {
		return false
	}
	return !long || r.longInFlight < r.spec.LongCapacity
}

// tunnels reports whether the provider is reached through the tunnel, as
// its adapter declared (false before it ever declared: it cannot be
// dispatched to before then anyway).
func (r *resource) tunnels() bool { return r.caps.GetTunnel() }

// category is the provider's resource kind: as configured, else as its
// adapter declared, else as its type is known to be (so that a node that
// never connected shows its vllm provider as local_inference, CONTRACT §3
// "default from type"), else api.
func (r *resource) category() string {
	if r.spec.Category != "" {
		return r.spec.Category
	}
	if c := r.caps.GetCategory(); c != "" {
		return c
	}
	if c := typeCategories[r.spec.Type]; c != "" {
		return c
	}
	return "api"
}

// typeCategories are the resource kinds of the adapter types the node
// ships, as their adapters declare them; a type not listed is api until its
// adapter declares otherwise.
var typeCategories = map[string]string{
	config.ProviderTypeVLLM:     "local_inference",
	config.ProviderTypeLlamaCpp: "local_inference",
	config.ProviderTypeOllama:   "local_inference",
	"cli":                       "cli",
}

// couldTake reports whether the resource could ever take a request of this
// kind (it may not be live now): dispatched to, with slots of the kind, and
// able to serve it.
func (r *resource) couldTake(long, tunnel bool) bool {
	// A provider that never declared what it serves might serve it.
	return r.referenced && r.spec.Capacity > 0 && (!long || r.spec.LongCapacity > 0) && (r.caps == nil || r.serves(tunnel))
}

// serves reports whether the resource can serve a request that needs the
// tunnel (see Request.NeedsTunnel) at all.
func (r *resource) serves(tunnel bool) bool { return !tunnel || r.tunnels() }

// dying reports whether the resource's connection has already closed: the
// registry fences it a moment later, and until then none of its slots may
// be handed out (a waiter given one would fail instead of moving on).
func (r *resource) dying() bool {
	return r.conn != nil && r.conn.IsClosed()
}

// loadStale is the age past which a load report no longer informs routing.
const loadStale = 30 * time.Second

// routeLoad is the load routing may use now.
func (r *resource) routeLoad(now time.Time) route.Load {
	if !r.load.Known || now.Sub(r.loadAt) > loadStale {
		return route.Load{}
	}
	return r.load
}

type candidate struct {
	res    *resource
	target string
}

// model is one external model group.
type model struct {
	name    string
	spec    config.ModelSpec
	cands   []candidate // preference order
	pending int         // waiters in queues
	// strategy picks among candidates with room (models[].routing), and
	// prefixes is its prefix index (prefix_affinity only; nil otherwise).
	strategy route.Strategy
	prefixes *route.Prefixes
	// queues holds this model's waiters by kind (queueOf: long or not,
	// needing the tunnel or not), oldest first, so a freed slot finds its
	// waiter without walking waiters that cannot use it: within one queue
	// every waiter fits a resource alike.
	queues [4]*list.List
	// pinned holds the waiters that wait for one provider (a Responses
	// follow-up whose previous response that provider holds, see
	// pinForLocked), by provider and kind, in queue order as queues are:
	// only a slot of that provider is handed to them, and no other
	// provider's pump walks them. An entry exists only while its list is
	// not empty (nil map: none).
	pinned map[pinKey]*list.List
}

// pinKey names one list of waiters pinned to res, of queue kind kind.
type pinKey struct {
	res  *resource
	kind int
}

func newModel(name string) *model {
	return &model{name: name, queues: [4]*list.List{list.New(), list.New(), list.New(), list.New()}}
}

// queueOf is the queue kind of a waiter: bit 0 long, bit 1 needs the
// tunnel.
func queueOf(long, tunnel bool) int {
	k := 0
	if long {
		k |= 1
	}
	if tunnel {
		k |= 2
	}
	return k
}

// kindLong and kindTunnel read a queue kind back.
func kindLong(k int) bool   { return k&1 != 0 }
func kindTunnel(k int) bool { return k&2 != 0 }

// Request is what the gateway knows about a request when it asks for a
// lease.
type Request struct {
	Model string
	// PromptTokens is the caller's estimate; at or above the model's
	// long_context_tokens the request is long.
	PromptTokens int
	// SessionID (X-IOP-Session-Id): prefer the provider that served the
	// session last while it has room.
	SessionID string
	// NeedsTunnel: only a provider reached through the tunnel can serve the
	// request (/v1/responses, several choices or prompts): no other
	// candidate is ever chosen for it, however idle; and when the model has
	// no such candidate at all it fails at once with ErrNoCapableProvider.
	NeedsTunnel bool
	// Prompt is the request's prompt in one canonical rendering, for
	// prefix_affinity (the gateway passes the request body as sent: an SDK
	// renders the same conversation to the same leading bytes, so a later
	// turn shares the earlier turns' prefix). Nil means no affinity.
	Prompt []byte
	// Avoid lists providers this request already failed on (failover):
	// they are never chosen for it.
	Avoid []ProviderRef
	// NoWait: take a candidate with room now or fail with ErrNoProvider;
	// never queue (a failover does not wait its turn a second time).
	NoWait bool
	// Priority orders the queue: a waiter of priority p is served as if it
	// had arrived p × PriorityStep earlier (later for negative p). So a
	// higher priority goes first, and ageing bounds how long it can keep a
	// lower one waiting: never more than the difference times the step.
	// Zero is the default.
	Priority int
	// Deadline, if set, is when the caller stops waiting for an answer: a
	// waiter still queued then is dropped at once with ErrQueueTimeout
	// instead of at the end of the model's queue_timeout_sec.
	Deadline time.Time
	// PreviousResponseID is a Responses follow-up's previous_response_id
	// ("": none). The provider that answered the response of that id
	// (RememberResponse) is chosen while it is among the model's
	// candidates and has room, before the session's: servers such as vLLM
	// keep stored responses in their own memory and answer any other
	// provider's follow-up 404.
	PreviousResponseID string
}

// PriorityStep is how much earlier one priority level counts a waiter as
// having arrived (see Request.Priority).
const PriorityStep = 5 * time.Second

// ProviderRef names one (node, provider) resource.
type ProviderRef struct{ Node, Provider string }

func avoided(avoid []ProviderRef, k resKey) bool {
	for _, a := range avoid {
		if a.Node == k.node && a.Provider == k.provider {
			return true
		}
	}
	return false
}

type waitResult struct {
	lease *Lease
	err   error
}

// waiter is a queued request. It lives in its model's queue of its kind
// until it gets a lease, times out, or its caller leaves.
type waiter struct {
	model   *model
	long    bool
	tunnel  bool // needs the tunnel
	session string
	hashes  []uint64 // the prompt's prefix hashes (prefix_affinity)
	member  string   // its place in the cluster's wait set ("" without a ledger)
	prio    int      // Request.Priority
	seq     uint64   // arrival order across all models
	arrived time.Time
	// key orders waiters (lowest first): arrival time since the
	// dispatcher started, less Priority × PriorityStep; ties by seq.
	key   int64
	qelem *list.Element // in queue; nil once removed
	// queue is the list w is in: model.queues[queueOf(long, tunnel)], or
	// model.pinned's list of pin and its kind while pin is set.
	queue *list.List
	// pin is the only provider w may be granted while set (nil: any
	// candidate): the one holding its previous response. Cleared (w made
	// ordinary) once that provider cannot serve it any more
	// (unpinStaleLocked).
	pin *resource
	// granting: a cluster hand-on of a slot to this waiter is in flight
	// (handOnLocked); it keeps its place meanwhile. racedFull counts its
	// hand-ons in a row that met a Full raced by an announcement.
	granting  bool
	racedFull int
	result    chan waitResult // buffered 1: the settling side never blocks
}

// testHookQueued, when set (by tests only, before any Acquire), runs in
// Acquire once a waiter is queued and the lock released.
var testHookQueued func()

// Acquire returns a lease on one of the model's candidates, waiting in the
// model's queue when none has room. It fails with ErrModelNotFound,
// ErrNoProvider, ErrQueueFull, ErrQueueTimeout, or ctx's error.
func (d *Dispatcher) Acquire(ctx context.Context, req Request) (*Lease, error) {
	d.learnResponse(ctx, req.Model, req.PreviousResponseID)
	start := time.Now()
	d.mu.Lock()
	m := d.models[req.Model]
	if m == nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrModelNotFound, req.Model)
	}
	if d.ctx.Err() != nil {
		d.mu.Unlock()
		return nil, ErrDispatcherShutdown
	}
	var hashes []uint64
	if m.prefixes != nil && len(req.Prompt) >= route.BlockSize {
		hashes = route.Hash(req.Prompt)
	}
	long := m.spec.LongContextTokens > 0 && req.PromptTokens >= m.spec.LongContextTokens
	tunnel := req.NeedsTunnel
	if !m.couldServe(long, false) {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: model %s has no candidate that can take this request", ErrNoProvider, req.Model)
	}
	if !m.couldServe(long, tunnel) {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: model %s", ErrNoCapableProvider, req.Model)
	}
	racedFull := 0
	// pin is the provider the last pick refused the other candidates for
	// (nil: none). The waiter is pinned by that same reading of the
	// remembered response: read again, the id could have expired since,
	// and the waiter would queue ordinary beside the free candidates the
	// pick passed over.
	var pin *resource
	for {
		var c *candidate
		if c, pin = d.pickLocked(m, long, tunnel, &req, hashes); c == nil {
			break
		}
		var (
			l   *Lease
			err error
		)
		if d.ledger != nil {
			l, err = d.grantClusterLocked(m, c, long, req, hashes, racedFull)
		} else {
			l = d.grantLocked(m, c, long, req.SessionID, hashes, "")
		}
		if errors.Is(err, errRacedFull) {
			racedFull++
		}
		if errors.Is(err, errRetryPick) {
			if d.models[req.Model] != m {
				// A reload removed or rebuilt the model during the
				// ledger round trip: m's candidates are stale.
				d.mu.Unlock()
				return d.Acquire(ctx, req)
			}
			continue
		}
		if errors.Is(err, errYield) {
			// Older waiters on other edges go first: queue behind them,
			// pinned when c is the provider the request must wait for.
			pin = d.waitAfterYieldLocked(m, c, long, tunnel, &req)
			break
		}
		if err != nil {
			d.mu.Unlock()
			return nil, err
		}
		if l != nil {
			if len(req.Avoid) > 0 {
				m.unlearnLocked(hashes, req.Avoid)
			}
			d.mu.Unlock()
			d.metrics.queueWait(m.name, time.Since(start))
			return l, nil
		}
		// The cluster's other edges hold c's slots (now remoteFull, so
		// not picked again): try the next candidate.
	}
	if d.ctx.Err() != nil {
		// Close ran while a ledger round trip had the lock released: it
		// has failed the waiters already and would never fail this one.
		d.mu.Unlock()
		return nil, ErrDispatcherShutdown
	}
	if req.NoWait {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: model %s has no other candidate with room", ErrNoProvider, req.Model)
	}
	if grace := m.spec.OfflineGrace(); grace > 0 && !m.liveWithin(start, grace, long, tunnel) {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: model %s has had no live candidate for %s", ErrNoProvider, req.Model, grace)
	}
	if m.spec.MaxQueue < 0 || m.pending >= m.spec.MaxQueue {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: model %s", ErrQueueFull, req.Model)
	}
	d.waiterSeq++
	w := &waiter{model: m, long: long, tunnel: tunnel, session: req.SessionID, hashes: hashes, seq: d.waiterSeq, arrived: start, prio: req.Priority, result: make(chan waitResult, 1),
		key: int64(start.Sub(d.epoch)) - int64(req.Priority)*int64(PriorityStep)}
	d.enqueueLocked(w, pin)
	if d.ledger != nil {
		d.waitLocked(w, 0)
	}
	timeout := time.Duration(m.spec.QueueTimeoutSec * float64(time.Second))
	d.mu.Unlock()
	if testHookQueued != nil {
		testHookQueued()
	}
	if !req.Deadline.IsZero() {
		// The caller's deadline cuts the wait short: queued past it, the
		// request could not be answered in time anyway.
		timeout = min(timeout, max(time.Until(req.Deadline), 0))
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var cause error
	select {
	case res := <-w.result:
		d.metrics.queueWait(m.name, time.Since(start))
		return res.lease, res.err
	case <-ctx.Done():
		cause = ctx.Err()
	case <-timer.C:
		cause = fmt.Errorf("%w: model %s after %s", ErrQueueTimeout, req.Model, timeout)
	}
	d.mu.Lock()
	if w.qelem != nil {
		d.removeWaiterLocked(w)
		d.mu.Unlock()
		d.metrics.queueWait(m.name, time.Since(start))
		return nil, cause
	}
	d.mu.Unlock()
	// Settled while we were giving up: a granted lease goes back unless we
	// merely timed out, in which case the caller may as well use it.
	res := <-w.result
	if res.lease != nil && ctx.Err() != nil {
		res.lease.Release(ReasonCancelled)
		return nil, ctx.Err()
	}
	d.metrics.queueWait(m.name, time.Since(start))
	return res.lease, res.err
}

// before reports whether w is served before o.
func (w *waiter) before(o *waiter) bool {
	if w.key != o.key {
		return w.key < o.key
	}
	return w.seq < o.seq
}

// insertWaiter puts w in q by its order: from the back, so that the usual
// case (equal priorities: w is the latest) costs O(1). A queue is bounded
// by max_queue, so the walk is too.
func insertWaiter(q *list.List, w *waiter) *list.Element {
	for e := q.Back(); e != nil; e = e.Prev() {
		if !w.before(e.Value.(*waiter)) {
			return q.InsertAfter(w, e)
		}
	}
	return q.PushFront(w)
}

// couldServe reports whether any candidate could ever take a request of
// this kind (it may not be live now).
func (m *model) couldServe(long, tunnel bool) bool {
	for _, c := range m.cands {
		if c.res.couldTake(long, tunnel) {
			return true
		}
	}
	return false
}

// liveWithin reports whether any candidate that could take a request of
// this kind is live and not reported offline or draining, or stopped being so less
// than grace before now:
// only then is queueing worth it (a node that just dropped usually
// reconnects within seconds; one gone for longer is not waited for).
func (m *model) liveWithin(now time.Time, grace time.Duration, long, tunnel bool) bool {
	for _, c := range m.cands {
		r := c.res
		if !r.couldTake(long, tunnel) {
			continue
		}
		if (r.live && !unservable(r.health)) || now.Sub(r.downSince) < grace {
			return true
		}
	}
	return false
}

// unlearnLocked drops the providers a failover avoids from the prefix
// index entries of its prompt, once the failover has a lease (which
// recorded its own provider): the conversation continues on that one, and
// the next turn must find it there rather than tie with a provider the
// prompt failed on and lose to config order. A failed provider that had
// served earlier turns loses their shorter prefixes too; the provider now
// holding the conversation has them all.
func (m *model) unlearnLocked(hashes []uint64, avoid []ProviderRef) {
	if m.prefixes == nil || len(hashes) == 0 {
		return
	}
	for i := range m.cands {
		if r := m.cands[i].res; avoided(avoid, r.key) {
			m.prefixes.Drop(hashes, r.id)
		}
	}
}

// pickLocked chooses among live candidates with room: the provider that
// answered the request's previous response while it has room, else none
// when the request is to wait for that provider (pinForLocked: it is
// full; pin is then that provider), else the session's last provider while
// it has room, else the one the model's routing strategy picks
// (route.Pick) among those with room.
func (d *Dispatcher) pickLocked(m *model, long, tunnel bool, req *Request, hashes []uint64) (*candidate, *resource) {
	avoid := req.Avoid
	if id := req.PreviousResponseID; id != "" {
		if key, ok := d.responses.get(id); ok {
			if c := m.fittingLocked(key, long, tunnel, avoid); c != nil {
				return c, nil
			}
			if pin := d.pinForLocked(m, long, tunnel, req); pin != nil {
				return nil, pin // full: the request waits for it
			}
		}
	}
	if session := req.SessionID; session != "" {
		if key, ok := d.affinity.get(session); ok {
			if c := m.fittingLocked(key, long, tunnel, avoid); c != nil {
				return c, nil
			}
		}
	}
	// Scratch slices, reused under d.mu: picking allocates nothing.
	fit, cands, ids := d.pickFit[:0], d.pickCands[:0], d.pickIDs[:0]
	now := time.Now()
	for i := range m.cands {
		c := &m.cands[i]
		if !c.res.fits(long) || !c.res.serves(tunnel) || avoided(avoid, c.res.key) {
			continue
		}
		fit = append(fit, c)
		cands = append(cands, route.Candidate{InFlight: c.res.inFlight, Capacity: c.res.spec.Capacity, Load: c.res.routeLoad(now)})
		ids = append(ids, c.res.id)
	}
	d.pickFit, d.pickCands, d.pickIDs = fit, cands, ids
	var match []int
	if m.prefixes != nil && len(hashes) > 0 {
		match = m.prefixes.Longest(d.pickMatch[:0], hashes, ids)
		d.pickMatch = match
	}
	i := route.Pick(m.strategy, cands, match, route.DefaultOptions())
	if i < 0 {
		return nil, nil
	}
	return fit[i], nil
}

// fittingLocked is m's candidate on the resource key when it has room for
// the request now and the request does not avoid it; else nil.
func (m *model) fittingLocked(key resKey, long, tunnel bool, avoid []ProviderRef) *candidate {
	for i := range m.cands {
		if c := &m.cands[i]; c.res.key == key && c.res.fits(long) && c.res.serves(tunnel) && !avoided(avoid, key) {
			return c
		}
	}
	return nil
}

// grantLocked leases c for a request. With a cluster ledger, ledgerID is
// the ledger slot the caller took for it (grantClusterLocked, handOn).
func (d *Dispatcher) grantLocked(m *model, c *candidate, long bool, session string, hashes []uint64, ledgerID string) *Lease {
	r := c.res
	r.inFlight++
	if long {
		r.longInFlight++
	}
	l := &Lease{
		d: d, res: r, gen: r.gen, conn: r.conn,
		NodeID: r.key.node, ProviderID: r.key.provider, ProviderType: r.spec.Type,
		Category: r.category(), ToolMode: r.spec.WireToolMode(), Target: c.target,
		Model: m.name, Workspace: m.spec.Workspace, Long: long, SessionID: session,
		AcquiredAt: time.Now(), CancelGrace: r.cancelGrace, Tunnel: r.tunnels(),
		MaxAttempts: m.spec.MaxAttempts, ledgerID: ledgerID,
	}
	r.leases[l] = struct{}{}
	if session != "" {
		d.affinity.put(session, r.key)
	}
	if m.prefixes != nil && len(hashes) > 0 {
		m.prefixes.Record(hashes, r.id)
	}
	d.metrics.leaseAcquired(r.key)
	return l
}

func (d *Dispatcher) removeWaiterLocked(w *waiter) {
	if w.member != "" {
		d.unwaitLocked(w)
	}
	w.queue.Remove(w.qelem)
	if w.pin != nil && w.queue.Len() == 0 {
		delete(w.model.pinned, pinKey{w.pin, queueOf(w.long, w.tunnel)})
	}
	w.qelem = nil
	w.model.pending--
}

// failStrandedLocked settles, for every model, the waiters of each kind
// none of its candidates could ever take now (a reload or an applied
// refresh left it no provider reached through the tunnel, or none with
// slots): they get the error a new request of their kind gets at once
// rather than waiting out their queue timeout for a slot that cannot come.
//
// Waiters pinned to a provider that cannot serve them any more are made
// ordinary first (unpinStaleLocked): a reload or an applied refresh may
// have taken their provider away.
func (d *Dispatcher) failStrandedLocked() {
	d.unpinStaleLocked()
	for _, m := range d.models {
		for kind, q := range m.queues {
			if q.Len() == 0 {
				continue
			}
			long, tunnel := kindLong(kind), kindTunnel(kind)
			var err error
			switch {
			case !m.couldServe(long, false):
				err = fmt.Errorf("%w: model %s has no candidate that can take this request", ErrNoProvider, m.name)
			case !m.couldServe(long, tunnel):
				err = fmt.Errorf("%w: model %s", ErrNoCapableProvider, m.name)
			default:
				continue
			}
			for e := q.Front(); e != nil; e = q.Front() {
				w := e.Value.(*waiter)
				d.removeWaiterLocked(w)
				w.result <- waitResult{err: err}
			}
		}
	}
}

// failWaitersLocked settles every waiter of m with err, pinned ones too.
func (d *Dispatcher) failWaitersLocked(m *model, err error) {
	fail := func(q *list.List) {
		for e := q.Front(); e != nil; e = q.Front() {
			w := e.Value.(*waiter)
			d.removeWaiterLocked(w)
			w.result <- waitResult{err: err}
		}
	}
	for _, q := range m.queues {
		fail(q)
	}
	for _, q := range m.pinned {
		fail(q) // removes q's entry (deleting while ranging is safe)
	}
}

// pumpLocked hands r's free slots to waiters, oldest first: each slot goes
// to the oldest waiter that has r as a candidate and fits it (a long waiter
// needs a free long slot too). Long requests cannot starve: a long waiter
// is skipped only while r's long slots are full, and the release of a long
// lease frees a normal slot and a long slot at once, which then goes to the
// oldest fitting waiter, so the long waiter is served no later than every
// younger request.
//
// The oldest fitting waiter is the oldest of the queue heads of the models
// that list r, normal and (while r has a long slot) long, and of the heads
// of their lists of waiters pinned to r: within one list every waiter fits
// r alike, and waiters pinned to other providers are in lists of their
// own, never walked here. So a grant costs O(models listing r) (four map
// look-ups more for a model with pinned waiters), however many requests
// wait for other providers, pinned or not.
func (d *Dispatcher) pumpLocked(r *resource) {
	for r.fits(false) {
		longFits := r.fits(true)
		tunnels := r.serves(true)
		var best *waiter
		for _, m := range r.models {
			for kind, q := range m.queues {
				if (kindLong(kind) && !longFits) || (kindTunnel(kind) && !tunnels) {
					continue
				}
				best = headBefore(q, best)
				if len(m.pinned) > 0 {
					if pq := m.pinned[pinKey{r, kind}]; pq != nil {
						best = headBefore(pq, best)
					}
				}
			}
		}
		if best == nil {
			return
		}
		if d.ledger != nil {
			if d.ctx.Err() != nil {
				// Closing: Close fails the waiters, and a take started
				// now could end after the returner's last batch.
				return
			}
			if time.Now().Before(d.ledgerDownUntil) {
				// Redis just failed: the retry tick pumps r once the
				// backoff has passed, rather than every release now.
				r.ledgerRetry = true
				return
			}
			d.handOnLocked(r, best)
			continue
		}
		l := d.grantLocked(best.model, best.model.candidateFor(r), best.long, best.session, best.hashes, "")
		d.removeWaiterLocked(best)
		best.result <- waitResult{lease: l}
	}
}

// headBefore is q's first waiter not being granted a slot when it is
// served before best (or best is nil), else best. Waiters being granted a
// slot (cluster hand-ons in flight, at most one per reserved slot) are
// passed over.
func headBefore(q *list.List, best *waiter) *waiter {
	for e := q.Front(); e != nil; e = e.Next() {
		if w := e.Value.(*waiter); !w.granting {
			if best == nil || w.before(best) {
				return w
			}
			return best
		}
	}
	return best
}

func (m *model) candidateFor(r *resource) *candidate {
	for i := range m.cands {
		if m.cands[i].res == r {
			return &m.cands[i]
		}
	}
	return nil
}

// affinityCache remembers, for a bounded number of keys (session ids,
// response ids), which resource served each last. The oldest entry is
// evicted first; with a ttl, an entry older than it is also forgotten.
type affinityCache struct {
	max   int
	ttl   time.Duration    // how long an entry is kept; 0: until evicted
	now   func() time.Time // the clock ttl is measured by (time.Now; tests set their own)
	order *list.List       // of string keys, oldest first
	m     map[string]affinityEntry
}

type affinityEntry struct {
	key  resKey
	elem *list.Element
	at   time.Time // when put; zero without a ttl
}

// newAffinityCache is a cache of at most max entries (max > 0), kept
// until evicted.
func newAffinityCache(max int) *affinityCache { return newExpiringCache(max, 0) }

// newExpiringCache is a cache of at most max entries (max > 0), kept for
// ttl each (0: until evicted).
func newExpiringCache(max int, ttl time.Duration) *affinityCache {
	return &affinityCache{max: max, ttl: ttl, now: time.Now, order: list.New(), m: map[string]affinityEntry{}}
}

func (a *affinityCache) get(s string) (resKey, bool) {
	e, ok := a.m[s]
	if ok && a.ttl > 0 && a.now().Sub(e.at) >= a.ttl {
		a.order.Remove(e.elem)
		delete(a.m, s)
		return resKey{}, false
	}
	return e.key, ok
}

func (a *affinityCache) put(s string, k resKey) {
	var at time.Time
	if a.ttl > 0 {
		at = a.now()
	}
	if e, ok := a.m[s]; ok {
		a.order.MoveToBack(e.elem)
		a.m[s] = affinityEntry{key: k, elem: e.elem, at: at}
		return
	}
	a.m[s] = affinityEntry{key: k, elem: a.order.PushBack(s), at: at}
	if a.order.Len() > a.max {
		old := a.order.Remove(a.order.Front()).(string)
		delete(a.m, old)
	}
}
