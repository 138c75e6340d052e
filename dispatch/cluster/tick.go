package cluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed pending.lua
var pendingSrc string

var pendingScript = newScript(pendingSrc)

// Alive marks this edge live for the TTL: its waiters count (see Take).
// ErrRefused when Redis answers with an error reply, else ErrUnavailable.
func (l *Ledger) Alive(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	if err := l.aliveCmd(ctx, l.rdb).Err(); err != nil {
		return fmt.Errorf("%w: alive: %w", failureClass(err), err)
	}
	return nil
}

// aliveCmd queues (or, on a client, sends) the liveness mark.
func (l *Ledger) aliveCmd(ctx context.Context, c redis.Cmdable) *redis.StatusCmd {
	return c.Set(ctx, l.edgeKeys+l.cfg.EdgeID, 1, l.cfg.TTL)
}

// Renew extends the leases this edge holds (by key) by the TTL, and
// returns, by key, those the ledger no longer counts: expired (renewals
// failed for longer than the TTL), or gone with the data (a Redis that
// restarted without persistence, a flushed database). Renew does not put
// those back itself: one may have been returned since the caller listed
// it, and a return can be overtaken by this round trip; the caller sends
// the ones still held as OpReadd, in order with its returns. On an error
// the keys whose renewal did answer are still reported; ErrRefused when
// Redis answered every key (those refused were not extended),
// ErrUnavailable when some went unanswered.
func (l *Ledger) Renew(ctx context.Context, held map[string][]HeldLease) (map[string][]string, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	pipe := l.rdb.Pipeline()
	keys := l.queueRenewals(ctx, pipe, held)
	sent := l.exec(ctx, pipe)
	return renewed(keys, sent)
}

// queueRenewals queues the renewal of held on pipe, one script per key,
// and returns the keys in their order.
func (l *Ledger) queueRenewals(ctx context.Context, pipe redis.Pipeliner, held map[string][]HeldLease) []string {
	keys := make([]string, 0, len(held))
	for key, leases := range held {
		args := make([]any, 0, 2*len(leases)+1)
		args = append(args, l.cfg.TTL.Milliseconds())
		for _, hl := range leases {
			isLong := "0"
			if hl.Long {
				isLong = "1"
			}
			args = append(args, hl.ID, isLong)
		}
		at := l.at(key)
		// By its SHA1 (see Apply), sent again whole after NOSCRIPT.
		renewScript.EvalSha(ctx, pipe, []string{at, at + ":long"}, args...)
		keys = append(keys, key)
	}
	return keys
}

// exec sends pipe and, when Redis answered it all, sends again what it
// answered NOSCRIPT on (evalAgain). It returns the commands, each with
// its own reply or error.
//
// When some command went unanswered nothing is sent again, and a NOSCRIPT
// reply left is no refusal: its command did not run for want of its
// script, which the resend would have loaded, and was not sent again for
// want of the rest of the answer. It counts as unanswered (errNotSentAgain),
// as that rest does: a tick whose renewals Redis answered NOSCRIPT and
// whose liveness mark's reply was cut is an outage, not a refusal of
// renewals.
func (l *Ledger) exec(ctx context.Context, pipe redis.Pipeliner) []redis.Cmder {
	sent, err := pipe.Exec(ctx)
	switch {
	case err == nil:
	case answered(sent):
		_ = evalAgain(ctx, l.rdb, sent) // each command's error is read by the caller
	default:
		for _, c := range sent {
			if noScript(c.Err()) {
				// Not %w: the reply must not read as one (answered,
				// failureClass).
				c.SetErr(fmt.Errorf("%w (%s)", errNotSentAgain, c.Err()))
			}
		}
	}
	return sent
}

// errNotSentAgain is the error of a command Redis answered NOSCRIPT in a
// round trip whose other replies did not all come (see exec).
var errNotSentAgain = errors.New("cluster: script not loaded, and not sent again: its round trip went unanswered")

// renewed is the outcome of the renewals of keys, sent as cmds (see
// Renew).
func renewed(keys []string, cmds []redis.Cmder) (map[string][]string, error) {
	var missing map[string][]string
	for i, c := range cmds {
		ids, cerr := c.(*redis.Cmd).StringSlice()
		if cerr != nil || len(ids) == 0 {
			continue
		}
		if missing == nil {
			missing = map[string][]string{}
		}
		missing[keys[i]] = ids
	}
	if err := firstErr(cmds); err != nil {
		if answered(cmds) {
			return missing, fmt.Errorf("%w: renew: %w", ErrRefused, err)
		}
		return missing, fmt.Errorf("%w: renew: %w", ErrUnavailable, err)
	}
	return missing, nil
}

// SetPending publishes this edge's waiting requests by model (a hash that
// expires after the TTL unless refreshed), for every edge's status.
// ErrRefused when Redis answers with an error reply, else ErrUnavailable.
func (l *Ledger) SetPending(ctx context.Context, pending map[string]int) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	pipe := l.rdb.Pipeline()
	l.queuePending(ctx, pipe, pending)
	return pendingErr(l.exec(ctx, pipe)[0].Err())
}

// queuePending queues the publication of pending on pipe (pending.lua:
// one command, the figures replaced at once).
func (l *Ledger) queuePending(ctx context.Context, pipe redis.Pipeliner, pending map[string]int) {
	args := make([]any, 0, 3+2*len(pending))
	args = append(args, l.cfg.TTL.Milliseconds(), (3 * l.cfg.TTL).Milliseconds(), l.cfg.EdgeID)
	for m, n := range pending {
		args = append(args, m, n)
	}
	pendingScript.EvalSha(ctx, pipe, []string{l.pendingKeys + l.cfg.EdgeID, l.pendingEdges}, args...)
}

// pendingErr is the error of a publication of pending figures, from its
// command's (nil: published).
func pendingErr(err error) error {
	if err != nil {
		return fmt.Errorf("%w: pending: %w", failureClass(err), err)
	}
	return nil
}

// TickResult is what one Tick did: Missing is Renew's leases the ledger
// no longer counts; Renew, Alive and Pending are the failures of the
// renewals (as Renew's), of the liveness mark (as Alive's) and of the
// publication of pending figures (as SetPending's), nil when accepted.
type TickResult struct {
	Missing               map[string][]string
	Renew, Alive, Pending error
}

// Tick is Renew, Alive and SetPending in one round trip (one pipeline,
// in that order) and under one deadline, Timeout after it began: the
// cluster loop's every TTL/3, which handles no announcement while it
// runs, costs one timeout at most on a Redis that does not answer, not
// one per call. Each part is applied or refused on its own (a renewal
// refused does not keep the edge from being marked live), and a NOSCRIPT
// resend, when Redis lost its scripts, is the one more round trip, within
// the same deadline.
func (l *Ledger) Tick(ctx context.Context, held map[string][]HeldLease, pending map[string]int) TickResult {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	pipe := l.rdb.Pipeline()
	keys := l.queueRenewals(ctx, pipe, held)
	l.aliveCmd(ctx, pipe)
	l.queuePending(ctx, pipe, pending)
	sent := l.exec(ctx, pipe)
	n := len(keys)
	var res TickResult
	if n > 0 {
		res.Missing, res.Renew = renewed(keys, sent[:n])
	}
	if err := sent[n].Err(); err != nil {
		res.Alive = fmt.Errorf("%w: alive: %w", failureClass(err), err)
	}
	res.Pending = pendingErr(sent[n+1].Err())
	return res
}
