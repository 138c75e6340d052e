package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/nodewire"
)

// Several edges. A node serving a cluster keeps one session with every
// edge, each under the same connect policy (SupervisorConfig) but its own
// Supervisor: its own dial, handshake, ready, heartbeat and fencing, so one
// edge going away never disturbs the sessions with the others. All
// sessions share the agent (its adapters and their capacity gates: the
// node's own bound on what reaches a backend, whichever edge sent the
// work). Every edge of a cluster serves the same config file; the node
// applies what each edge hands it, and identical configs change nothing.

// ErrNoEdge is wrapped in the error of an edge name that did not resolve
// within the attempt budget (with ErrAttemptsExhausted).
var ErrNoEdge = errors.New("nodeagent: no edge address")

// lookupHost resolves an edge's DNS name (a variable so that tests can
// stand in for DNS).
var lookupHost = net.DefaultResolver.LookupHost

// RunEdges runs one Supervisor per edge address (base's Dial.Address is
// replaced) until ctx is cancelled or every one of them has stopped: it
// returns nil on cancellation, else the stopped supervisors' errors joined
// (a fatal rejection wraps ErrFatal). With resolve, a DNS name among the
// addresses stands for every address it resolves to (config.NodeEdge's
// addresses), of one family (oneFamily); without it the addresses are
// dialled as given.
//
// A name that does not resolve is looked up again under the connect
// policy, each failed lookup counting as a failed attempt: DNS that is not
// there yet when the node starts (or is briefly down) is a retryable
// remote failure, not a reason to exit or to leave that edge out. Once it
// resolved, the name is followed (nameFollower): an edge recreated with
// a new address is reached there.
func RunEdges(ctx context.Context, base SupervisorConfig, addresses []string, resolve bool, agent *Agent, log *zap.Logger) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error // guarded by mu
	)
	stopped := func(edge string, err error) {
		mu.Lock()
		errs = append(errs, fmt.Errorf("edge %s: %w", edge, err))
		mu.Unlock()
	}
	claims := &edgeClaims{owner: map[string]edgeEntry{}, refused: map[edgeEntry]func(){}}
	start := func(e edgeEntry) {
		addr := e.text
		cfg := base
		cfg.Dial.Address = addr
		// TLS verifies the address's host (unless edge.tls.server_name
		// names another).
		cfg.Dial.ServerName = ""
		sup := NewSupervisor(cfg, agent, log.With(zap.String("edge", addr)))
		wg.Add(1)
		// Owner: RunEdges. Stops when ctx is cancelled or this edge's
		// supervisor gives up (fatal rejection, attempts exhausted).
		go func() {
			defer wg.Done()
			err := sup.Run(ctx)
			// A name reaching this address may serve it from now on
			// (and meet the same fate, or not, on its own budget).
			claims.release(edgeKey(addr), e)
			if err != nil {
				log.Error("edge session loop stopped", zap.String("edge", addr), zap.Error(err))
				stopped(addr, err)
			}
		}()
	}
	// An entry listed twice in any spelling (edgeKey: edge. and EDGE are
	// edge, 07000 is 7000) is one entry: one session, one attempt budget.
	// Config validation refuses such a list; a caller that passes one
	// anyway gets the first. Nothing takes over when it gives up, as
	// nothing would for an entry listed once: a second budget spent on
	// the same address (or name) would only delay the node's exit.
	var entries []edgeEntry
	first := make(map[string]string, len(addresses))
	for i, a := range addresses {
		key := edgeKey(a)
		if was, ok := first[key]; ok {
			log.Warn("edge address listed twice; one session", zap.String("edge", a), zap.String("served_as", was))
			continue
		}
		first[key] = a
		entries = append(entries, edgeEntry{index: i, text: a})
	}
	// Addresses dialled as given first: they are the edge's for good, so a
	// name that resolves to one of them leaves it to them (two sessions of
	// one node with one edge would supersede each other every reconnect
	// interval).
	var names []edgeEntry
	for _, e := range entries {
		host, _, err := net.SplitHostPort(e.text)
		if err == nil && resolve && isEdgeName(host) {
			names = append(names, e)
			continue
		}
		claims.claim(edgeKey(e.text), e) // the first claim of its key: entries are distinct, names come later
		start(e)
	}
	for _, e := range names {
		a := e.text
		host, port, _ := net.SplitHostPort(a)
		f := &nameFollower{base: base, host: host, port: config.EdgePort(port), entry: e, claims: claims, agent: agent,
			log: log.With(zap.String("edge_name", a)), members: map[string]*edgeMember{},
			kick: make(chan struct{}, 1), done: make(chan struct{})}
		wg.Add(1)
		// Owner: RunEdges. Stops when ctx is cancelled, the node
		// drains, the name's attempt budget runs out or a supervisor of
		// the name gives up (it waits for them all).
		go func() {
			defer wg.Done()
			if err := f.run(ctx); err != nil && ctx.Err() == nil {
				stopped(a, err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return errors.Join(errs...)
}

// edgeClaims records which entry of edge.addresses serves each ip:port,
// so that two entries reaching one edge (two names, or a name and an
// address) give it one session, not two.
type edgeClaims struct {
	mu    sync.Mutex
	owner map[string]edgeEntry // guarded by mu: edgeKey → the entry serving it
	// refused holds, for each name refused a claim since the last
	// release, what asks it to look its name up again: once an address
	// is released, a name that lists it takes it over (its session is
	// gone). Guarded by mu; at most one per entry of edge.addresses.
	refused map[edgeEntry]func()
}

// An edgeEntry is one entry of edge.addresses: its place in the list (an
// entry listed twice is two entries) and its text.
type edgeEntry struct {
	index int
	text  string
}

// claim records entry as serving key unless another entry does; it returns
// that other entry and false then.
func (c *edgeClaims) claim(key string, entry edgeEntry) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claimLocked(key, entry)
}

func (c *edgeClaims) claimLocked(key string, entry edgeEntry) (string, bool) {
	if holder, ok := c.owner[key]; ok && holder != entry {
		return holder.text, false
	}
	c.owner[key] = entry
	return entry.text, true
}

// claimOrWait is claim for a name: refused, it has retry called once an
// address is released. retry must not block (nor take a follower's mu:
// release is called under one). The refusal and the recording of retry
// are one step under mu: a release between them would find no retry to
// call, and a name whose other session is up would never look again.
func (c *edgeClaims) claimOrWait(key string, entry edgeEntry, retry func()) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	holder, ok := c.claimLocked(key, entry)
	if !ok {
		c.refused[entry] = retry
	}
	return holder, ok
}

// release forgets entry's claim on key (its supervisor returned) and has
// the names refused a claim look theirs up again. They are asked whatever
// the key: a release is rare (a supervisor stopped), and a lookup too many
// costs less than bookkeeping by key.
func (c *edgeClaims) release(key string, entry edgeEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner[key] != entry {
		return
	}
	delete(c.owner, key)
	for e, retry := range c.refused {
		retry()
		delete(c.refused, e)
	}
}

// edgeKey is addr in one spelling for one socket, as config validation
// spells it (config.EdgeAddressKey): an IP address unmapped, a name in
// lower case without its trailing dot, the port as a number.
func edgeKey(addr string) string { return config.EdgeAddressKey(addr) }

// oneFamily keeps the IPv4 addresses of ips when there are any, else all
// of them (IPv6). A dual-stack edge has an A and an AAAA record: a session
// through each would be two sessions of one node with one edge, each
// registration superseding the other, every reconnect interval, with the
// runs on it.
func oneFamily(ips []string) []string {
	var v4 []string
	for _, ip := range ips {
		if a := net.ParseIP(ip); a != nil && a.To4() != nil {
			v4 = append(v4, ip)
		}
	}
	if len(v4) > 0 {
		return v4
	}
	return ips
}

// resolveEdge looks host up until it resolves, ctx ends, base's attempt
// budget runs out (then the error wraps ErrNoEdge and
// ErrAttemptsExhausted) or agent drains (errDraining: a node that is
// stopping does not connect). Each lookup is bounded as a handshake is.
func resolveEdge(ctx context.Context, base SupervisorConfig, host string, agent *Agent, log *zap.Logger) ([]string, error) {
	drained, unwatch := agent.wakeOnDrain()
	defer unwatch()
	for failures := 1; ; failures++ {
		if agent.Draining() {
			return nil, errDraining
		}
		ips, err := lookupEdge(ctx, base, host)
		if err == nil {
			return ips, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		log.Warn("edge address does not resolve", zap.Int("attempt", failures), zap.Int("max_attempts", base.MaxAttempts), zap.Error(err))
		if base.MaxAttempts > 0 && failures >= base.MaxAttempts {
			return nil, fmt.Errorf("%w after %d attempts: %w", ErrAttemptsExhausted, failures, err)
		}
		t := time.NewTimer(base.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-drained:
			t.Stop() // checked at the top of the loop
		case <-t.C:
		}
	}
}

// lookupEdge looks host up once, bounded as a handshake is. No address at
// all is a failure (wrapping ErrNoEdge, as every failure does).
func lookupEdge(ctx context.Context, base SupervisorConfig, host string) ([]string, error) {
	bound := base.Dial.HandshakeTimeout
	if bound <= 0 {
		bound = nodewire.DefaultHandshakeTimeout
	}
	lctx, cancel := context.WithTimeout(ctx, bound)
	ips, err := lookupHost(lctx, host)
	cancel()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrNoEdge, err)
	case len(ips) == 0:
		return nil, fmt.Errorf("%w: %s has no address", ErrNoEdge, host)
	}
	return ips, nil
}

// maxAddressesPerName bounds the supervisors (sessions) one edge name
// gets: a name answering with more addresses than that has the first of
// them (in address order, so that the choice is the same at every lookup)
// followed, and the excess logged once.
const maxAddressesPerName = 64

// A nameFollower keeps a node with the edge(s) one DNS name stands for,
// wherever the name points: an edge recreated under a new address (docker
// compose, Kubernetes) is reached there. It looks the name up again when
// a session of the name is lost or a connect attempt fails, and every
// reconnect interval while none of the name's sessions is ready, never
// while they all stay up (no DNS load while connected); lookups are at
// least an interval apart. A new address gets a supervisor; an address no
// longer listed is stopped at its next reconnect (a live session is never
// cut because DNS changed). A failed lookup keeps the addresses known.
// A name none of whose addresses it serves (all are served by other
// entries, or none is listed any more) keeps following it at its
// interval: a later answer may list one of its own, or the entry serving
// one may let it go (edgeClaims.release asks for a lookup then).
//
// The attempt budget is the name's: consecutive failed attempts across
// its addresses, reset when a session of the name reaches ready and not
// counted while another one is ready (the name is reachable then). A name
// whose addresses all keep failing spends it as a single address does.
type nameFollower struct {
	base       SupervisorConfig
	host, port string    // the name as the operator wrote it, the port as a number
	entry      edgeEntry // the name's entry in edge.addresses
	claims     *edgeClaims
	agent      *Agent
	log        *zap.Logger
	kick       chan struct{} // cap 1: a session was lost or an attempt failed
	done       chan struct{} // closed once no supervisor of the name runs or is to run again (endIfIdleLocked)
	wg         sync.WaitGroup

	mu       sync.Mutex
	members  map[string]*edgeMember // guarded by mu: by address
	running  int                    // guarded by mu: supervisors not yet returned
	ready    int                    // guarded by mu: members with a ready session
	failures int                    // guarded by mu: the name's consecutive failed attempts
	gaveUp   bool                   // guarded by mu: the budget is spent
	ended    bool                   // guarded by mu: done is closed (endIfIdleLocked)
	capped   bool                   // guarded by mu: the excess was logged
	shadowed bool                   // guarded by mu: an address served by another entry was logged
	errs     []error                // guarded by mu: why supervisors gave up
}

// An edgeMember is one address of a name and its supervisor. Its fields
// are guarded by its follower's mu.
type edgeMember struct {
	addr    string // ip:port
	listed  bool   // in the name's last answer (within the cap)
	ready   bool   // its session is ready
	stopped bool   // its supervisor gave up (fatal): not restarted while listed
}

// run follows the name until ctx ends or done is closed; it returns why
// its supervisors gave up (nil on cancellation or a drain).
func (f *nameFollower) run(ctx context.Context) error {
	ips, err := resolveEdge(ctx, f.base, f.host, f.agent, f.log)
	if errors.Is(err, errDraining) {
		return nil
	}
	if err != nil {
		if ctx.Err() == nil {
			f.log.Error("edge address does not resolve; giving up", zap.Error(err))
		}
		return err
	}
	// A drain wakes the loop, which from then on looks nothing up and
	// waits for the name's supervisors to stop (they do not reconnect).
	drained, unwatch := f.agent.wakeOnDrain()
	defer unwatch()
	f.mu.Lock()
	f.applyLocked(ctx, ips)
	f.mu.Unlock()
	defer f.wg.Wait()
	last := time.Now() // of the last lookup
	pending := false   // a lookup was asked for
	for {
		var wake <-chan time.Time
		var t *time.Timer
		if !f.agent.Draining() && (pending || f.readyCount() == 0) {
			t = time.NewTimer(time.Until(last.Add(f.base.Interval)))
			wake = t.C
		}
		select {
		case <-ctx.Done():
		case <-f.done:
		case <-f.kick:
			pending = true
		case <-drained:
		case <-wake:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
		if f.agent.Draining() {
			f.mu.Lock()
			f.endIfIdleLocked() // none may be running to close done
			f.mu.Unlock()
		}
		select {
		case <-f.done:
			// Every supervisor recorded its error before done closed.
			f.mu.Lock()
			defer f.mu.Unlock()
			return errors.Join(f.errs...)
		default:
		}
		if wake == nil || time.Now().Before(last.Add(f.base.Interval)) || f.agent.Draining() {
			continue // kicked: the lookup waits for its turn
		}
		if !pending && f.readyCount() > 0 {
			continue // a session got ready meanwhile
		}
		asked := pending
		pending = false
		last = time.Now()
		ips, err := lookupEdge(ctx, f.base, f.host)
		if err != nil {
			// A lookup asked for (a freed address, a lost session) is
			// asked again at the next interval: with another of the
			// name's sessions up nothing else would ask.
			pending = asked
			if ctx.Err() == nil {
				f.log.Warn("edge name does not resolve; keeping its known addresses", zap.Error(err))
			}
			continue
		}
		f.mu.Lock()
		f.applyLocked(ctx, ips)
		f.mu.Unlock()
	}
}

func (f *nameFollower) readyCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

// applyLocked follows the answer ips: new addresses get a supervisor
// while the name has fewer than maxAddressesPerName that keep a session,
// its budget is not spent and the node does not drain; the others are
// marked listed or not.
func (f *nameFollower) applyLocked(ctx context.Context, ips []string) {
	ips = slices.Clone(oneFamily(ips))
	slices.SortFunc(ips, compareIPs)
	ips = slices.Compact(ips)
	listed := make(map[string]bool, len(ips))
	for _, ip := range ips {
		listed[net.JoinHostPort(ip, f.port)] = true
	}
	keeping := 0
	for addr, m := range f.members {
		m.listed = listed[addr]
		switch {
		case m.stopped && !m.listed:
			delete(f.members, addr)
		case !m.stopped && (m.listed || m.ready):
			keeping++
		}
	}
	for _, ip := range ips {
		addr := net.JoinHostPort(ip, f.port)
		if f.members[addr] != nil || f.ended || f.gaveUp || f.agent.Draining() {
			continue // the name is given up, or the node is stopping
		}
		if keeping >= maxAddressesPerName {
			if !f.capped {
				f.capped = true
				f.log.Warn("edge name has more addresses than are followed", zap.Int("addresses", len(ips)), zap.Int("followed", maxAddressesPerName))
			}
			continue
		}
		if holder, ok := f.claims.claimOrWait(edgeKey(addr), f.entry, f.kickLookup); !ok {
			if !f.shadowed {
				f.shadowed = true
				f.log.Warn("edge address already served by another entry of edge.addresses; one session", zap.String("edge", addr), zap.String("served_as", holder))
			}
			continue
		}
		keeping++
		f.startLocked(ctx, addr)
	}
	f.endIfIdleLocked()
}

// endIfIdleLocked closes done once no supervisor of the name runs and
// none is to run again: the node drains, or a supervisor gave up (a fatal
// rejection, or the name's budget spent; run returns their errors). A name
// with none running otherwise (its addresses are served by other entries,
// or no longer listed) keeps following.
func (f *nameFollower) endIfIdleLocked() {
	if f.running > 0 || f.ended {
		return
	}
	if !f.agent.Draining() && !f.gaveUp && len(f.errs) == 0 {
		return
	}
	f.ended = true
	close(f.done)
}

// compareIPs orders addresses numerically (strings that are not addresses
// last, by text).
func compareIPs(a, b string) int {
	x, errX := netip.ParseAddr(a)
	y, errY := netip.ParseAddr(b)
	switch {
	case errX == nil && errY == nil:
		return x.Compare(y)
	case errX == nil:
		return -1
	case errY == nil:
		return 1
	}
	return strings.Compare(a, b)
}

func (f *nameFollower) startLocked(ctx context.Context, addr string) {
	m := &edgeMember{addr: addr, listed: true}
	f.members[addr] = m
	f.running++
	cfg := f.base
	cfg.Dial.Address = addr
	// TLS still verifies the name the operator wrote (unless
	// edge.tls.server_name names another).
	cfg.Dial.ServerName = f.host
	log := f.log.With(zap.String("edge", addr))
	sup := NewSupervisor(cfg, f.agent, log)
	sup.watch = memberWatch{f: f, m: m}
	log.Info("following edge address")
	f.wg.Add(1)
	// Owner: the nameFollower, whose run waits for it. Stops when ctx is
	// cancelled, the node drains, the supervisor gives up (fatal
	// rejection, the name's budget spent) or its address is no longer
	// listed while its session is down.
	go func() {
		defer f.wg.Done()
		err := sup.Run(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error("edge session loop stopped", zap.Error(err))
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		// Another entry reaching this address may serve it from now on.
		f.claims.release(edgeKey(addr), f.entry)
		if err != nil {
			m.stopped = true
			f.errs = append(f.errs, fmt.Errorf("%s: %w", addr, err))
		} else if f.members[addr] == m {
			delete(f.members, addr)
		}
		f.running--
		f.endIfIdleLocked()
	}()
}

// memberWatch is one member's sessionWatch.
type memberWatch struct {
	f *nameFollower
	m *edgeMember
}

func (w memberWatch) ready() {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	w.m.ready = true
	w.f.ready++
	w.f.failures = 0
}

func (w memberWatch) lost() {
	w.f.mu.Lock()
	w.m.ready = false
	w.f.ready--
	w.f.mu.Unlock()
	w.f.kickLookup()
}

func (w memberWatch) failed(own int) (int, bool) {
	defer w.f.kickLookup()
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	if w.f.ready > 0 {
		return own, false // another address of the name is up
	}
	w.f.failures++
	if w.f.gaveUp || w.f.base.MaxAttempts <= 0 || w.f.failures < w.f.base.MaxAttempts {
		return w.f.failures, false
	}
	w.f.gaveUp = true
	return w.f.failures, true
}

func (w memberWatch) next() bool {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	if !w.f.gaveUp && w.m.listed {
		return true
	}
	if !w.f.gaveUp {
		w.f.log.Info("edge address no longer listed; stopped", zap.String("edge", w.m.addr))
	}
	if w.f.members[w.m.addr] == w.m {
		delete(w.f.members, w.m.addr)
	}
	return false
}

// kickLookup asks run for a lookup without waiting.
func (f *nameFollower) kickLookup() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// isEdgeName reports whether an edge address's host is a DNS name to
// follow rather than an IP address literal. netip, not net.ParseIP: a
// link-local literal with its zone (fe80::1%eth0) is an address, not a
// name to look up (and to verify the edge's certificate against).
func isEdgeName(host string) bool {
	_, err := netip.ParseAddr(host)
	return err != nil
}
