package cluster

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Refusal is the error of an Apply whose updates Redis answered, refusing
// some of them with an error reply (errors.Is(err, ErrRefused) holds; Err
// is the first reply). Updates lists the indices of the refused updates,
// in order. The returns of one resource are sent in one script (see
// Apply): when it is refused every return of it is listed, though the
// ones before the refusal may have been made; sending such a return again
// removes nothing more.
type Refusal struct {
	Updates []int
	Err     error
}

func (r *Refusal) Error() string { return ErrRefused.Error() + ": apply: " + r.Err.Error() }

// Unwrap is ErrRefused and the reply.
func (r *Refusal) Unwrap() []error { return []error{ErrRefused, r.Err} }

// returnGroup is the returns of one resource in a batch of Apply: sent as
// one script at the place of the last of them.
type returnGroup struct {
	key  string   // the lease key, under the ledger's prefix
	last int      // the index of its last return in the batch
	cmd  int      // the index of its command in the pipeline
	keys []string // KEYS of return.lua
	args []any    // ARGV of return.lua
}

// Apply sends updates in one round trip, in their order (one pipeline, on
// one connection: a waiter's removal never overtakes its registration),
// except that the returns of one resource are made together where the
// last of them stands (one script, return.lua). Moving a return later
// within its batch never reorders it with what it must follow: an
// OpReadd of a lease is queued only while the lease is held, so before
// its return, never after. A resource is announced once per batch, after
// its returns, and only when one of them removed a lease (a return of a
// lease Redis does not hold wakes no edge: one whose take was refused or
// unanswered, one sent again, and one Redis lost, whose slot was freed,
// unannounced, when Redis lost it; every take since counted it free, and
// an edge told Full before the loss retries on its own backoff; see
// TestReturnOfALeaseRedisLostAnnouncesNothing). On an error none, some
// or all of them took effect: leases not returned expire within the TTL,
// waiters not removed age out of their set. A *Refusal (ErrRefused) when Redis
// answered every update (the ones refused never take effect, save a
// script's writes before its refusal), ErrUnavailable when some went
// unanswered (those may still take effect later).
//
// The scripts go by their SHA1 (EVALSHA), not their bodies: a batch of
// one return is some 150 bytes, not 2 KB. A Redis that lost its script
// cache (a restart, SCRIPT FLUSH) answers NOSCRIPT; see evalAgain.
func (l *Ledger) Apply(ctx context.Context, updates []Update) error {
	if len(updates) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	groups := l.returnGroups(updates)
	pipe := l.rdb.Pipeline()
	n := 0 // commands queued
	for i, u := range updates {
		key := l.at(u.Key)
		switch u.Kind {
		case OpWait:
			waitScript.EvalSha(ctx, pipe, []string{key}, u.ID, (10 * MaxYield).Milliseconds(), max(u.Age, 0).Milliseconds())
		case OpUnwait:
			pipe.ZRem(ctx, key, u.ID)
		case OpReadd:
			isLong := "0"
			if u.Long {
				isLong = "1"
			}
			readdScript.EvalSha(ctx, pipe, []string{key, key + ":long", l.returnedKey(u.ID)}, l.cfg.TTL.Milliseconds(), u.ID, isLong)
		case OpReturn:
			g := groupOf(groups, key)
			if g.last != i {
				continue // sent with the resource's last return
			}
			g.cmd = n
			returnScript.EvalSha(ctx, pipe, g.keys, g.args...)
		default:
			// Checked before anything is sent: a kind added without its
			// command here would otherwise shift every later reply.
			return fmt.Errorf("cluster: apply: update %d has unknown kind %d", i, u.Kind)
		}
		n++
	}
	cmds, err := pipe.Exec(ctx)
	if err == nil {
		return nil
	}
	if answered(cmds) {
		err = evalAgain(ctx, l.rdb, cmds)
		if err == nil {
			return nil
		}
	}
	if !answered(cmds) {
		return fmt.Errorf("%w: apply: %w", ErrUnavailable, err)
	}
	return &Refusal{Updates: l.refusedUpdates(updates, groups, cmds), Err: err}
}

// returnGroups gathers the returns of updates by resource, in the order
// of their last returns. A batch returns few resources: a linear search
// costs less than a map.
func (l *Ledger) returnGroups(updates []Update) []returnGroup {
	var groups []returnGroup
	ttl := l.cfg.TTL.Milliseconds()
	for i, u := range updates {
		if u.Kind != OpReturn {
			continue
		}
		key := l.at(u.Key)
		g := groupOf(groups, key)
		if g == nil {
			groups = append(groups, returnGroup{key: key, keys: []string{key, key + ":long"}, args: []any{ttl, l.freed, key}})
			g = &groups[len(groups)-1]
		}
		g.last = i
		fence := "0"
		if u.Fence {
			fence = "1"
			g.keys = append(g.keys, l.returnedKey(u.ID))
		}
		g.args = append(g.args, u.ID, fence)
	}
	return groups
}

// groupOf is the group of key in groups, or nil.
func groupOf(groups []returnGroup, key string) *returnGroup {
	for i := range groups {
		if groups[i].key == key {
			return &groups[i]
		}
	}
	return nil
}

// refusedUpdates lists the updates whose command Redis refused: cmds are the
// commands Apply queued for updates (one per update, one per group of
// returns).
func (l *Ledger) refusedUpdates(updates []Update, groups []returnGroup, cmds []redis.Cmder) []int {
	var out []int
	n := 0
	for i, u := range updates {
		c := n
		if u.Kind == OpReturn {
			g := groupOf(groups, l.at(u.Key))
			c = g.cmd
			if g.last != i {
				if cmds[c].Err() != nil {
					out = append(out, i)
				}
				continue
			}
		}
		n++
		if cmds[c].Err() != nil {
			out = append(out, i)
		}
	}
	return out
}

// scriptBodies are the bodies of the ledger's scripts by SHA1, for
// evalAgain. newScript fills it as it makes each script, and every script
// of the package is made by it (TestScriptsAreMadeByNewScriptOnly): a
// script sent by hash always has its body here. Written only while the
// package's variables are initialized, read-only after.
var scriptBodies = map[string]string{}

// newScript is redis.NewScript that also records the script's body by its
// SHA1 in scriptBodies. Only for package-level variables (the map is not
// guarded).
func newScript(src string) *redis.Script {
	s := redis.NewScript(src)
	scriptBodies[s.Hash()] = src
	return s
}

// noScript reports whether err is Redis's NOSCRIPT reply to an EVALSHA
// (the script is not in its cache). go-redis gives replies no type: the
// reply's prefix, which Redis documents, is the only way to tell.
func noScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// evalAgain sends again, in one more round trip, the commands of an
// answered pipeline from the first one Redis answered NOSCRIPT on, in
// their order, each EVALSHA as EVAL with its script's body (which loads
// the script for the next batches); it puts their replies in cmds and
// returns the first error left among cmds (nil: none). Without NOSCRIPT
// it only returns that error.
//
// Not only the NOSCRIPT ones: the commands after the first of them did
// run (a plain command, or a script another client loaded meanwhile), and
// sending the refused ones alone would run them after those. So a re-add
// and a return of one lease never end applied in the wrong order. Running
// the others twice, in their order, changes nothing: a return of a lease
// already returned removes nothing and announces nothing, a re-add of a
// lease still held sets its expiry anew, as does a renewal, a ZREM
// removes nothing more; a waiter registered twice keeps the later arrival
// (a race with another client's SCRIPT FLUSH, so rare).
func evalAgain(ctx context.Context, rdb *redis.Client, cmds []redis.Cmder) error {
	first := -1
	for i, c := range cmds {
		if noScript(c.Err()) {
			first = i
			break
		}
	}
	if first >= 0 {
		pipe := rdb.Pipeline()
		again := make([]redis.Cmder, 0, len(cmds)-first)
		for _, c := range cmds[first:] {
			args := c.Args()
			if name, _ := args[0].(string); name == "evalsha" {
				body, ok := scriptBodies[args[1].(string)]
				if !ok {
					// A script not made by newScript (which the tests
					// rule out): its NOSCRIPT stands, a refusal of that
					// kind, and nothing is sent again. Redis runs an
					// EVAL of an empty body as a script doing nothing
					// and answers nil (redis.Nil): the update not made,
					// and the batch refused with a kind no reply has.
					return firstErr(cmds)
				}
				args = append([]any{"eval", body}, args[2:]...)
			}
			again = append(again, pipe.Do(ctx, args...))
		}
		_, _ = pipe.Exec(ctx) // each command's error is read below
		copy(cmds[first:], again)
	}
	return firstErr(cmds)
}

// firstErr is the first error among cmds, or nil.
func firstErr(cmds []redis.Cmder) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}
