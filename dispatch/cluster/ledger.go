// Package cluster is the lease ledger several edges share on Redis
// (cluster.redis.address): a lease on a (node, provider) is taken and
// returned atomically across every edge, carries its holder edge, and
// expires unless that edge keeps renewing it.
//
// Layout: one sorted set per resource, iop:lease:<node>/<provider>, whose
// members are the lease ids (<edge id>/<n>) and whose scores are the
// leases' expiry in Redis server milliseconds; long leases are also in
// iop:lease:<node>/<provider>:long. Taking a lease is one Lua script:
// drop expired members, check the count against the capacity the caller
// passes, add. Returning is ZREM plus a PUBLISH on iop:freed naming the
// resource, which wakes the edges that have requests waiting for it. The
// scripts read the time from Redis (TIME), so edges' clocks never matter.
package cluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// ErrUnavailable wraps every failure to reach Redis: the caller must not
// admit work to shared resources until Redis answers again.
var ErrUnavailable = errors.New("cluster: redis unavailable")

// ErrWrongType: a key of the ledger holds something else than the ledger
// wrote (another program's value under the iop: prefix). Redis answers,
// so this is not ErrUnavailable: only the resource the key counts cannot
// be granted until an operator removes the key.
var ErrWrongType = errors.New("cluster: a ledger key holds a value of another type")

// FreedChannel is the pub/sub channel on which returns are announced.
const FreedChannel = "iop:freed"

const keyPrefix = "iop:lease:"

// Config configures the ledger.
type Config struct {
	// Address is Redis's host:port.
	Address string
	// Password, if any (never logged).
	Password string
	// DB is the Redis database number.
	DB int
	// TTL is how long a lease lives in Redis without renewal: the longest
	// a crashed edge's capacity stays taken. Renewal runs every TTL/3.
	TTL time.Duration
	// Timeout bounds each Redis call.
	Timeout time.Duration
	// EdgeID names this edge in lease ids (unique per edge process).
	EdgeID string
}

// Ledger is one edge's client of the shared ledger. Safe for concurrent
// use.
type Ledger struct {
	cfg Config
	rdb *redis.Client
	seq atomic.Uint64
}

// Open connects (lazily: the first call dials) and returns the ledger.
func Open(cfg Config) *Ledger {
	rdb := redis.NewClient(&redis.Options{
		Addr: cfg.Address, Password: cfg.Password, DB: cfg.DB,
		DialTimeout: cfg.Timeout, ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout,
		PoolSize: 16, MaxRetries: -1, // a failed call fails now; the caller decides
	})
	return &Ledger{cfg: cfg, rdb: rdb}
}

// Close releases the connections.
func (l *Ledger) Close() error { return l.rdb.Close() }

// Client is the Redis client, for the subscriber.
func (l *Ledger) Client() *redis.Client { return l.rdb }

// NewLeaseID returns a fresh id of this edge.
func (l *Ledger) NewLeaseID() string {
	return l.cfg.EdgeID + "/" + strconv.FormatUint(l.seq.Add(1), 10)
}

// Key is the ledger key of a resource. Node ids and provider names are
// free text, so the parts that would make two resources' keys (or one's
// key and another's long set, <key>:long) the same are escaped: '%' and,
// in the node id, '/' (node "a/b" with provider "c" against node "a" with
// "b/c"); in a provider name ending in ":long", its ':' (provider "p:long"
// against p's long set). Other names keep their plain key, the one edges
// of earlier versions use.
func Key(node, provider string) string {
	node = keyEscaper.Replace(node)
	if strings.HasSuffix(provider, ":long") {
		provider = longEscaper.Replace(provider)
	} else {
		provider = percentEscaper.Replace(provider)
	}
	return keyPrefix + node + "/" + provider
}

var (
	keyEscaper     = strings.NewReplacer("%", "%25", "/", "%2F")
	longEscaper    = strings.NewReplacer("%", "%25", ":", "%3A")
	percentEscaper = strings.NewReplacer("%", "%25")
)

//go:embed take.lua
var takeSrc string

//go:embed renew.lua
var renewSrc string

var (
	takeScript  = redis.NewScript(takeSrc)
	renewScript = redis.NewScript(renewSrc)
)

// Outcome of Take.
type Outcome int

const (
	Full  Outcome = iota // the cluster has no free slot
	Taken                // the lease is held
	Yield                // an older waiter of another edge is owed the slot
)

// Fairness across edges (see WaitKey): a request yields a slot to a waiter
// of another live edge that is ahead of it by more than FairSlack (arrival
// less priority shift, as each edge orders its own queue), unless that
// waiter has waited longer than MaxYield (an edge that cannot serve its
// waiter never holds the others up for longer).
//
// MaxShift bounds a request's priority as time (the shift of Take and of
// NewWaiterID; larger ones count as MaxShift): how far ahead of the
// waiters that arrived before it a waiter may be.
const (
	FairSlack = 100 * time.Millisecond
	MaxYield  = 2 * time.Second
	MaxShift  = time.Minute
)

// clampShift bounds shift to ±MaxShift.
func clampShift(shift time.Duration) time.Duration { return min(max(shift, -MaxShift), MaxShift) }

// Take claims one slot of key for id when fewer than capacity leases (and,
// for a long one, fewer than longCapacity long leases) are held across
// the cluster. waitKey and member name the request's model-and-kind wait
// set and its own place in it ("" when it is not queued); waitKey ""
// skips the fairness check. shift is a request's priority as time (it
// counts as arriving that much earlier; see Wait). waited is how long a
// queued request has waited on this edge (0 for a fresh one): its place
// when member is not in the wait set, which keeps a waiter for
// 10 × MaxYield only (a queue_timeout_sec is often longer) and may have
// missed its registration; without it a waiter that has waited 25 s
// would count as arriving now and yield to younger waiters of other
// edges. It fails with
// ErrUnavailable when Redis does not answer (the script may then have run
// or not), and with ErrWrongType when one of the keys holds another type.
func (l *Ledger) Take(ctx context.Context, key string, capacity, longCapacity int, long bool, id, waitKey, member string, shift, waited time.Duration) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	isLong := "0"
	if long {
		isLong = "1"
	}
	n, err := takeScript.Run(ctx, l.rdb, []string{key, key + ":long", waitKey},
		l.cfg.TTL.Milliseconds(), capacity, longCapacity, isLong, id, member,
		FairSlack.Milliseconds(), MaxYield.Milliseconds(), clampShift(shift).Milliseconds(), MaxShift.Milliseconds(),
		max(waited, 0).Milliseconds()).Int()
	if err != nil {
		return Full, fmt.Errorf("%w: take: %w", ErrUnavailable, err)
	}
	switch n {
	case 1:
		return Taken, nil
	case 2:
		return Yield, nil
	case 3:
		return Full, fmt.Errorf("%w: take on %s or %s", ErrWrongType, key, waitKey)
	}
	return Full, nil
}

// WaitKey is the wait set of a model's requests of one queue kind, shared
// by every edge.
func WaitKey(model string, kind int) string { return "iop:wait:" + model + ":" + strconv.Itoa(kind) }

// NewWaiterID returns a fresh waiter member of this edge for a waiter
// registered with shift (its priority as time; see Take): the member
// carries it (<edge id>/w<n>:<shift ms>), so that Take tells how long the
// waiter has actually waited from its place in the set.
func (l *Ledger) NewWaiterID(shift time.Duration) string {
	return l.cfg.EdgeID + "/w" + strconv.FormatUint(l.seq.Add(1), 10) + ":" + strconv.FormatInt(clampShift(shift).Milliseconds(), 10)
}

//go:embed wait.lua
var waitSrc string

var waitScript = redis.NewScript(waitSrc)

// Alive marks this edge live for the TTL: its waiters count (see Take).
func (l *Ledger) Alive(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	if err := l.rdb.Set(ctx, "iop:edge:"+l.cfg.EdgeID, 1, l.cfg.TTL).Err(); err != nil {
		return fmt.Errorf("%w: alive: %w", ErrUnavailable, err)
	}
	return nil
}

// OpKind is what an Update does.
type OpKind uint8

const (
	// OpReturn gives a lease's slot back and announces the key on
	// FreedChannel.
	OpReturn OpKind = iota
	// OpWait puts a waiter in its wait set at Redis's now, its arrival
	// (its priority is in its member: see NewWaiterID).
	OpWait
	// OpUnwait takes a waiter out of its wait set.
	OpUnwait
)

// Update is one of the updates Apply sends: Key is the lease key (OpReturn)
// or the wait set (OpWait, OpUnwait), ID the lease id or waiter member.
type Update struct {
	Kind    OpKind
	Key, ID string
}

// Apply sends updates in one round trip, in their order (one pipeline, on
// one connection: a waiter's removal never overtakes its registration).
// Returns of one key are announced once. On an error none, some or all
// of them took effect: leases not returned expire within the TTL, waiters
// not removed age out of their set.
func (l *Ledger) Apply(ctx context.Context, updates []Update) error {
	if len(updates) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	pipe := l.rdb.Pipeline()
	var freed []string // keys whose returns are announced, in first-return order
	for _, u := range updates {
		switch u.Kind {
		case OpWait:
			// Eval, not EvalSha: a pipeline cannot fall back after NOSCRIPT.
			waitScript.Eval(ctx, pipe, []string{u.Key}, u.ID, (10 * MaxYield).Milliseconds())
		case OpUnwait:
			pipe.ZRem(ctx, u.Key, u.ID)
		default:
			pipe.ZRem(ctx, u.Key, u.ID)
			pipe.ZRem(ctx, u.Key+":long", u.ID)
			if !slices.Contains(freed, u.Key) {
				freed = append(freed, u.Key)
			}
		}
	}
	// Announced after every return of the batch is made, so that a woken
	// edge finds the slots free.
	for _, k := range freed {
		pipe.Publish(ctx, FreedChannel, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("%w: apply: %w", ErrUnavailable, err)
	}
	return nil
}

// Renew extends the leases this edge holds (ids by key) by the TTL. Leases
// that already expired are not brought back.
func (l *Ledger) Renew(ctx context.Context, held map[string][]string) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	pipe := l.rdb.Pipeline()
	for key, ids := range held {
		args := make([]any, 0, len(ids)+1)
		args = append(args, l.cfg.TTL.Milliseconds())
		for _, id := range ids {
			args = append(args, id)
		}
		// Eval, not EvalSha: a pipeline cannot fall back after NOSCRIPT.
		renewScript.Eval(ctx, pipe, []string{key, key + ":long"}, args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("%w: renew: %w", ErrUnavailable, err)
	}
	return nil
}

// Held counts the live leases of each key across the cluster.
func (l *Ledger) Held(ctx context.Context, keys []string) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	now, err := l.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: time: %w", ErrUnavailable, err)
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	min := strconv.FormatInt(now.UnixMilli(), 10)
	for i, k := range keys {
		cmds[i] = pipe.ZCount(ctx, k, "("+min, "+inf")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("%w: count: %w", ErrUnavailable, err)
	}
	out := make(map[string]int, len(keys))
	for i, k := range keys {
		out[k] = int(cmds[i].Val())
	}
	return out, nil
}

const pendingPrefix = "iop:pending:"

// pendingEdges is the set of edges that published pending figures: what
// Pending reads, so that it never walks the database (SCAN would visit
// every key of a Redis shared with other programs, and may return a key
// twice). An edge leaves it when it has none; a crashed edge is removed
// by the next Pending that finds its figures expired, and the set itself
// expires when no edge has published for three TTLs.
const pendingEdges = "iop:pending-edges"

// SetPending publishes this edge's waiting requests by model (a hash that
// expires after the TTL unless refreshed), for every edge's status.
func (l *Ledger) SetPending(ctx context.Context, pending map[string]int) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	key := pendingPrefix + l.cfg.EdgeID
	pipe := l.rdb.TxPipeline()
	pipe.Del(ctx, key)
	if len(pending) > 0 {
		vals := make([]any, 0, 2*len(pending))
		for m, n := range pending {
			vals = append(vals, m, n)
		}
		pipe.HSet(ctx, key, vals...)
		pipe.PExpire(ctx, key, l.cfg.TTL)
		pipe.SAdd(ctx, pendingEdges, l.cfg.EdgeID)
		pipe.PExpire(ctx, pendingEdges, 3*l.cfg.TTL)
	} else {
		pipe.SRem(ctx, pendingEdges, l.cfg.EdgeID)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("%w: pending: %w", ErrUnavailable, err)
	}
	return nil
}

// maxEdges bounds the edges' pending hashes read for a status.
const maxEdges = 256

// Pending sums every edge's waiting requests by model. Edges whose figures
// expired (or are empty) leave the set as it is read.
func (l *Ledger) Pending(ctx context.Context) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	edges, err := l.rdb.SRandMemberN(ctx, pendingEdges, maxEdges).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: pending: %w", ErrUnavailable, err)
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(edges))
	for i, e := range edges {
		cmds[i] = pipe.HGetAll(ctx, pendingPrefix+e)
	}
	if len(edges) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("%w: pending: %w", ErrUnavailable, err)
		}
	}
	out := map[string]int{}
	var gone []any
	for i, c := range cmds {
		vals := c.Val()
		if len(vals) == 0 {
			gone = append(gone, edges[i])
		}
		for m, v := range vals {
			if k, err := strconv.Atoi(v); err == nil && k > 0 {
				out[m] += k
			}
		}
	}
	if len(gone) > 0 {
		// An edge that publishes again is added back; one racing this
		// removal is, at worst, missing from one status.
		_ = l.rdb.SRem(ctx, pendingEdges, gone...).Err()
	}
	return out, nil
}

// UseLogger sends the Redis client's own messages (reconnects, pool
// errors) to log at warn level instead of stderr. The client's logger is
// process-wide.
func UseLogger(log *zap.Logger) { redis.SetLogger(zapPrintf{log.Named("redis")}) }

type zapPrintf struct{ log *zap.Logger }

func (z zapPrintf) Printf(_ context.Context, format string, v ...any) {
	z.log.Warn(fmt.Sprintf(format, v...))
}
