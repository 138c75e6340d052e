// Package cluster is the lease ledger several edges share on Redis
// (cluster.redis.address): a lease on a (node, provider) is taken and
// returned atomically across every edge, carries its holder edge, and
// expires unless that edge keeps renewing it.
//
// Layout: one sorted set per resource, <prefix>:lease:<node>/<provider>,
// whose members are the lease ids (<edge id>/<n>) and whose scores are the
// leases' expiry in Redis server milliseconds; long leases are also in
// <prefix>:lease:<node>/<provider>:long. Taking a lease is one Lua script:
// drop expired members, check the count against the capacity the caller
// passes, add. Returning is one script per resource and batch (ZREM; a
// fenced return marks the lease returned first) that, when it removed a
// lease, PUBLISHes on <prefix>:freed naming the resource, which wakes the
// edges that have requests waiting for it.
// The scripts read the time from Redis (TIME), so edges' clocks never
// matter. The prefix is Config.KeyPrefix, "iop" by default.
package cluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ErrUnavailable wraps every failure to reach Redis: the caller must not
// admit work to shared resources until Redis answers again.
var ErrUnavailable = errors.New("cluster: redis unavailable")

// ErrWrongType: a key of the ledger holds something else than the ledger
// wrote (another program's value under the ledger's prefix). Redis answers,
// so this is not ErrUnavailable: only the resource the key counts cannot
// be granted until an operator removes the key.
var ErrWrongType = errors.New("cluster: a ledger key holds a value of another type")

// ErrRefused: Redis answered every update of an Apply but refused some with
// an error reply (a key of another type, out of memory, a read-only
// replica): nothing of the batch is still on its way, so nothing of it
// takes effect later; a refused plain command took no effect, a script
// refused part-way keeps the writes it made before the refusal; the
// others were applied. Take and Renew fail with it too when Redis answers
// them with an error reply: a take refused took no slot (one refused
// part-way may have, which its return undoes), a renewal refused did not
// extend the leases of its key. Not ErrUnavailable. Only true when Redis
// is reached directly: a proxy's error reply may come after the command
// ran.
var ErrRefused = errors.New("cluster: redis refused an update")

// DefaultKeyPrefix is the first part of every key and channel of the
// ledger when Config.KeyPrefix is empty: the names edges of earlier
// versions use.
const DefaultKeyPrefix = "iop"

// FreedChannel is the pub/sub channel on which returns are announced under
// DefaultKeyPrefix (a ledger's own: Ledger.FreedChannel).
const FreedChannel = DefaultKeyPrefix + ":freed"

const keyPrefix = DefaultKeyPrefix + ":lease:"

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
	// Timeout bounds each call of the ledger as a whole: every round trip
	// it makes (a NOSCRIPT resend, a fresh connection's dial and
	// handshake included) keeps to one deadline this long after the call
	// began. It must be positive (config: cluster.redis.timeout_ms, 1 ms
	// to 10 s); zero fails every call at once.
	Timeout time.Duration
	// EdgeID names this edge in lease ids (unique per edge process).
	EdgeID string
	// KeyPrefix is the first part of every key and channel (before its
	// ':'), so that deployments sharing one Redis keep apart: their
	// announcements too, which pub/sub delivers across databases. Empty:
	// DefaultKeyPrefix. It must not contain ':' (config checks it): the
	// first ':' of a key ends its prefix, and no prefix's keys can then
	// spell another's.
	KeyPrefix string
}

// Ledger is one edge's client of the shared ledger. Safe for concurrent
// use.
type Ledger struct {
	cfg Config
	rdb *redis.Client
	seq atomic.Uint64
	// prefix is cfg.KeyPrefix or DefaultKeyPrefix; freed, edgeKeys,
	// pendingKeys and pendingEdges the names under it. Set in Open.
	prefix, freed, edgeKeys, pendingKeys, pendingEdges string
	// edgeKeysArg is edgeKeys as Take's script argument, boxed once.
	edgeKeysArg any

	mu sync.Mutex
	// running counts the goroutines of Go not yet ended; closing is set
	// by Close (no Go starts after it); idle, made by a Close that found
	// some running, is closed when the last ends. Guarded by mu.
	running int
	closing bool
	idle    chan struct{}

	// refusedMu guards refused: the refusals of takes and renewals by
	// RefusedOp (NoteRefused).
	refusedMu sync.Mutex
	refused   [refusedOps]RefusalLog
}

// Open connects (lazily: the first call dials) and returns the ledger.
//
// Every call sets its context's deadline Timeout after it began, and
// ContextTimeoutEnabled makes go-redis bound each socket read and write by
// that deadline: without it the client set a fresh ReadTimeout and
// WriteTimeout on every round trip, so a call of two round trips (a
// NOSCRIPT resend, a fresh connection's handshake) could take twice the
// timeout or more. A connection whose
// read or write the deadline cut (a reply left half-read) is closed, not
// put back in the pool (go-redis counts any timeout as a bad connection:
// isBadConn without allowTimeout), so the next call never reads another
// call's reply. ReadTimeout and WriteTimeout still bound each round trip
// too (the earlier of the two wins). The pub/sub subscription is not
// changed by the option: go-redis's PubSub always bounds its reads by its
// context's deadline, and the subscriber's context has none.
//
// A new connection's handshake is made within the deadline of the call
// that needs it, so it is kept to HELLO alone: no CLIENT SETINFO (the
// library's name and version in CLIENT LIST) and no CLIENT
// MAINT_NOTIFICATIONS (Redis Enterprise's maintenance events, which a
// Redis 7 refuses after a round trip), each a round trip more that a
// Redis a fifth of the timeout away could not afford: its calls on new
// connections would fail at the deadline, and the connection with them.
// Two cases still take one more: a DB other than 0 (SELECT), and a Redis
// without HELLO (before 6, which the ledger supports: go-redis falls back
// to RESP2 on HELLO's error reply) with a password (AUTH); both within
// the same deadline (TestAHandshakeWithoutHelloKeepsToTheCallsDeadline).
func Open(cfg Config) *Ledger {
	rdb := redis.NewClient(&redis.Options{
		Addr: cfg.Address, Password: cfg.Password, DB: cfg.DB,
		DialTimeout: cfg.Timeout, ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout,
		ContextTimeoutEnabled:    true,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		PoolSize:                 16, MaxRetries: -1, // a failed call fails now; the caller decides
	})
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	l := &Ledger{cfg: cfg, rdb: rdb, prefix: prefix, freed: prefix + ":freed",
		edgeKeys: prefix + ":edge:", pendingKeys: prefix + ":pending:", pendingEdges: prefix + ":pending-edges"}
	l.edgeKeysArg = l.edgeKeys
	for op := range l.refused {
		l.refused[op].Msg = refusedMsgs[op]
	}
	return l
}

// FreedChannel is the pub/sub channel on which this ledger's returns are
// announced (<prefix>:freed). Its messages are the returned keys as Redis
// stores them; FreedKey maps one back to Key's spelling.
func (l *Ledger) FreedChannel() string { return l.freed }

// at is where key, spelled under DefaultKeyPrefix (Key, WaitKey), lives
// under this ledger's prefix. The callers name resources by Key alone, so
// that a resource's name does not depend on the ledger it is counted in;
// under the default prefix (every deployment that sets none) it costs
// nothing.
func (l *Ledger) at(key string) string {
	if l.prefix == DefaultKeyPrefix || key == "" {
		return key
	}
	return l.prefix + strings.TrimPrefix(key, DefaultKeyPrefix)
}

// FreedKey is the key (as Key spells it) that an announcement on
// FreedChannel names, or "" for a message that names no key of this
// ledger.
func (l *Ledger) FreedKey(payload string) string {
	rest, ok := strings.CutPrefix(payload, l.prefix)
	if !ok || !strings.HasPrefix(rest, ":") {
		return ""
	}
	if l.prefix == DefaultKeyPrefix {
		return payload
	}
	return DefaultKeyPrefix + rest
}

// CloseWait bounds how long Close waits for the goroutines of Go.
const CloseWait = 2 * time.Second

// Close waits for the goroutines of Go (up to CloseWait: they must bound
// their own work) and releases the connections. One still running past
// the wait finds the client closed: its calls fail at once.
func (l *Ledger) Close() error {
	l.mu.Lock()
	l.closing = true
	idle := l.idle
	if l.running > 0 && idle == nil {
		idle = make(chan struct{})
		l.idle = idle
	}
	l.mu.Unlock()
	if idle != nil {
		t := time.NewTimer(CloseWait)
		select {
		case <-idle:
		case <-t.C:
		}
		t.Stop()
	}
	return l.rdb.Close()
}

// Go runs f on a goroutine that Close waits for, so that work begun just
// before the ledger closes (a return sent after its dispatcher closed) is
// not cut off by the connections closing under it. f should end within
// CloseWait: past it Close closes the connections, and f's calls fail at
// once. It reports false, and does not run f, once Close has begun.
func (l *Ledger) Go(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return false
	}
	l.running++
	// Owner: the Ledger (Close waits for it, up to CloseWait). Stops
	// when f returns, which bounds its own work.
	go func() {
		defer l.goDone()
		f()
	}()
	return true
}

// goDone ends one goroutine of Go.
func (l *Ledger) goDone() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running--
	if l.running == 0 && l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
}

// Timeout is the bound of each call (Config.Timeout).
func (l *Ledger) Timeout() time.Duration { return l.cfg.Timeout }

// Client is the Redis client, for the subscriber.
func (l *Ledger) Client() *redis.Client { return l.rdb }

// NewLeaseID returns a fresh id of this edge.
func (l *Ledger) NewLeaseID() string {
	return l.cfg.EdgeID + "/" + strconv.FormatUint(l.seq.Add(1), 10)
}

// Key is the ledger key of a resource under DefaultKeyPrefix (a Ledger
// with another prefix stores it under its own). Node ids and provider names are
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
	takeScript  = newScript(takeSrc)
	renewScript = newScript(renewSrc)
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
// or not), with ErrRefused when Redis answers with an error reply (out
// of memory, a read-only replica, loading: the server's, the same for
// every key; an ACL's NOPERM, for one key or for the script command, one
// kind either way), and with ErrWrongType when one of the keys holds
// another type (the one refusal that is the key's own: the caller may
// try another resource).
//
// A take of an id already marked returned (a fenced OpReturn of it ran
// first) takes nothing and answers Full: a take that got no answer may
// still reach Redis after the return its caller sent for it, which must
// then fence it (see Update.Fence).
func (l *Ledger) Take(ctx context.Context, key string, capacity, longCapacity int, long bool, id, waitKey, member string, shift, waited time.Duration) (Outcome, error) {
	return l.TakeFor(ctx, key, capacity, longCapacity, long, id, waitKey, "", member, shift, waited)
}

// TakeFor is Take with the pinned wait set of the resource and kind too
// (PinWaitKey; "" for none): the take also yields to an older waiter of
// another live edge that waits for this resource alone, and member may be
// in either set (a pinned waiter's is in pinKey).
func (l *Ledger) TakeFor(ctx context.Context, key string, capacity, longCapacity int, long bool, id, waitKey, pinKey, member string, shift, waited time.Duration) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	isLong := "0"
	if long {
		isLong = "1"
	}
	key, waitKey = l.at(key), l.at(waitKey)
	keys := []string{key, key + ":long", waitKey, l.returnedKey(id)}
	if pinKey != "" {
		// Not sent at all when there is none: a key-pattern ACL refuses a
		// script that declares the empty key.
		keys = append(keys, l.at(pinKey))
	}
	n, err := takeScript.Run(ctx, l.rdb, keys,
		l.cfg.TTL.Milliseconds(), capacity, longCapacity, isLong, id, member,
		FairSlack.Milliseconds(), MaxYield.Milliseconds(), clampShift(shift).Milliseconds(), MaxShift.Milliseconds(),
		max(waited, 0).Milliseconds(), l.edgeKeysArg).Int()
	if err != nil {
		return Full, fmt.Errorf("%w: take: %w", failureClass(err), err)
	}
	switch n {
	case 1:
		return Taken, nil
	case 2:
		return Yield, nil
	case 3:
		return Full, fmt.Errorf("%w: take on %s or its wait sets", ErrWrongType, key)
	}
	return Full, nil
}

// WaitKey is the wait set of a model's requests of one queue kind, shared
// by every edge, under DefaultKeyPrefix (see Key).
func WaitKey(model string, kind int) string {
	return DefaultKeyPrefix + ":wait:" + model + ":" + strconv.Itoa(kind)
}

// PinWaitKey is the wait set of the requests of one queue kind that wait
// for the resource whose Key is key alone (Responses follow-ups pinned to
// the provider that answered their previous response), shared by every
// edge, under DefaultKeyPrefix. Its own namespace (":pinwait:") keeps it
// apart from every lease key, whatever the names in key.
func PinWaitKey(key string, kind int) string {
	return DefaultKeyPrefix + ":pinwait:" + strconv.Itoa(kind) + ":" + strings.TrimPrefix(key, keyPrefix)
}

// NewWaiterID returns a fresh waiter member of this edge for a waiter
// registered with shift (its priority as time; see Take): the member
// carries it (<edge id>/w<n>:<shift ms>), so that Take tells how long the
// waiter has actually waited from its place in the set.
func (l *Ledger) NewWaiterID(shift time.Duration) string {
	return l.cfg.EdgeID + "/w" + strconv.FormatUint(l.seq.Add(1), 10) + ":" + strconv.FormatInt(clampShift(shift).Milliseconds(), 10)
}

//go:embed wait.lua
var waitSrc string

var waitScript = newScript(waitSrc)

// OpKind is what an Update does.
type OpKind uint8

const (
	// OpReturn gives a lease's slot back and, when Redis held the lease,
	// announces the key on FreedChannel.
	OpReturn OpKind = iota
	// OpWait puts a waiter in its wait set at Redis's now less its Age,
	// its arrival (its priority is in its member: see NewWaiterID).
	OpWait
	// OpUnwait takes a waiter out of its wait set.
	OpUnwait
	// OpReadd puts back a lease this edge still holds that the ledger
	// lost (see Renew), live for the TTL, whatever the count: the work is
	// running, and the other edges must count it. Sent in order with
	// returns, so that a lease returned meanwhile is never put back;
	// refused for a lease whose return was fenced (see Update.Fence).
	OpReadd
)

// Update is one of the updates Apply sends: Key is the lease key (OpReturn,
// OpReadd) or the wait set (OpWait, OpUnwait), ID the lease id or waiter
// member; Long marks a long lease (OpReadd).
//
// Fence (OpReturn) also marks the lease returned for the TTL, so that an
// OpReadd or a Take of it that Redis runs after the return is refused
// (a take that got no answer may still be on its way too): one sent in
// a batch that failed without an answer may still be on its way (held in
// a socket buffer, a Redis slower than the timeout), and would otherwise
// take the slot again, held by nobody, for the TTL. Only such returns
// need it: an OpReadd that was answered, or one sent in the same batch
// as the return, runs before the return does.
type Update struct {
	Kind    OpKind
	Key, ID string
	Long    bool
	Fence   bool
	// Age (OpWait) is how long the waiter has already waited: its arrival
	// is put that long before Redis's now (a waiter moved from one wait
	// set to another keeps its place).
	Age time.Duration
}

// returnedKey is where a fenced return marks lease id returned.
func (l *Ledger) returnedKey(id string) string { return l.prefix + ":returned:" + id }

// answered reports whether Redis answered every command of an executed
// pipeline: each succeeded or was refused with an error reply. A command
// that failed otherwise (a connection cut, a timeout) may have run, may
// run still, or never will.
func answered(cmds []redis.Cmder) bool {
	var reply redis.Error
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.As(err, &reply) {
			return false
		}
	}
	return true
}

// failureClass is the class of err, the failure of one command: ErrRefused
// for an error reply, ErrUnavailable for anything else (no answer). A nil
// reply (redis.Nil, of the same type) is no refusal; no script of the
// ledger answers one.
func failureClass(err error) error {
	var reply redis.Error
	if errors.As(err, &reply) && !errors.Is(err, redis.Nil) {
		return ErrRefused
	}
	return ErrUnavailable
}

// maxReplyKind bounds the length of a ReplyKind.
const maxReplyKind = 32

// ReplyKind is the error code of the Redis error reply err carries (its
// first word by Redis's convention: "WRONGTYPE", "OOM", "READONLY"), or ""
// when err carries none. At most maxReplyKind bytes.
func ReplyKind(err error) string {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return ""
	}
	kind, _, _ := strings.Cut(reply.Error(), " ")
	if len(kind) > maxReplyKind {
		kind = kind[:maxReplyKind]
	}
	return kind
}

// Ping tells whether Redis answers, within the ledger's timeout.
func (l *Ledger) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	if err := l.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: ping: %w", ErrUnavailable, err)
	}
	return nil
}

//go:embed readd.lua
var readdSrc string

//go:embed return.lua
var returnSrc string

var (
	readdScript  = newScript(readdSrc)
	returnScript = newScript(returnSrc)
)

// HeldLease is one lease this edge holds, for Renew.
type HeldLease struct {
	ID   string
	Long bool
}

// redisLogEvery: the Redis client's own messages are logged once per
// distinct text in this long. While Redis does not answer the client
// repeats one ("failed to dial") on every call: each renewal retry, take
// and return.
const redisLogEvery = 10 * time.Second

// UseLogger sends the Redis client's own messages (reconnects, pool
// errors) to log at warn level instead of stderr, each text at most once
// per redisLogEvery. The client's logger is process-wide.
func UseLogger(log *zap.Logger) {
	sampled := log.Named("redis").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, redisLogEvery, 1, 0)
	}))
	redis.SetLogger(zapPrintf{sampled})
}

type zapPrintf struct{ log *zap.Logger }

func (z zapPrintf) Printf(_ context.Context, format string, v ...any) {
	z.log.Warn(fmt.Sprintf(format, v...))
}
