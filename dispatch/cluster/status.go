package cluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed status.lua
var statusSrc string

var statusScript = newScript(statusSrc)

// Each edge publishes its waiting requests in <prefix>:pending:<edge id>.
// <prefix>:pending-edges (Ledger.pendingEdges) is the set of edges that
// published pending figures: what a status reads, so that it never walks
// the database (SCAN would visit every key of a Redis shared with other
// programs, and may return a key twice). An edge leaves it when it has
// none; a crashed edge is removed by the next status that finds its
// figures expired, and the set itself expires when no edge has published
// for three TTLs.
const (
	// maxEdges bounds the edges' pending hashes read for a status (a set
	// of more edges is read in part, a random maxEdges of them).
	maxEdges = 256
	// maxModels bounds the fields read of one edge's pending hash: one
	// of more is not counted (an edge publishes one field per model with
	// waiting requests).
	maxModels = 1024
	// maxFigure bounds one edge's figure of one model: a larger one is
	// not counted (no edge queues as many), so that the sums stay exact
	// in the script's numbers.
	maxFigure = 1 << 30
)

// Status is the cluster's occupancy, read at one instant: the live leases
// of each key across the cluster, and every edge's waiting requests
// summed by model (as the edges last published them). One script (one
// round trip; two when Redis lost its scripts, the resend within the same
// deadline) under one deadline, Timeout after the call began, whatever
// there is to read: len(keys) counts (the caller's resources), at most
// maxEdges hashes of at most maxModels fields. ErrUnavailable when Redis
// does not answer, ErrRefused when it answers with an error reply (a
// lease key of another type among them; the pending set or an edge's
// pending key of another type is not counted, as a hostile figure).
func (l *Ledger) Status(ctx context.Context, keys []string) (held, pending map[string]int, err error) {
	return l.status(ctx, keys, maxEdges)
}

// Held counts the live leases of each key across the cluster (Status
// without the pending figures).
func (l *Ledger) Held(ctx context.Context, keys []string) (map[string]int, error) {
	held, _, err := l.status(ctx, keys, 0)
	return held, err
}

// Pending sums every edge's waiting requests by model (Status without
// lease counts).
func (l *Ledger) Pending(ctx context.Context) (map[string]int, error) {
	_, pending, err := l.status(ctx, nil, maxEdges)
	return pending, err
}

// errStatusReply: the status script's reply is not what it returns.
var errStatusReply = errors.New("cluster: status: unexpected reply")

// status is Status reading at most edges pending hashes (0: none).
func (l *Ledger) status(ctx context.Context, keys []string, edges int) (map[string]int, map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	at := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		at = append(at, l.at(k))
	}
	at = append(at, l.pendingEdges)
	pipe := l.rdb.Pipeline()
	statusScript.EvalSha(ctx, pipe, at, l.pendingKeys, edges, maxModels, maxFigure)
	reply, err := l.exec(ctx, pipe)[0].(*redis.Cmd).Slice()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: status: %w", failureClass(err), err)
	}
	counts, figures, ok := statusParts(reply)
	if !ok || len(counts) != len(keys) || len(figures)%2 != 0 {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnavailable, errStatusReply)
	}
	held := make(map[string]int, len(keys))
	for i, k := range keys {
		n, _ := counts[i].(int64)
		held[k] = int(n)
	}
	pending := make(map[string]int, len(figures)/2)
	for i := 0; i < len(figures); i += 2 {
		m, _ := figures[i].(string)
		n, _ := figures[i+1].(int64)
		pending[m] += int(n)
	}
	return held, pending, nil
}

// statusParts splits the status script's reply into its counts and its
// pending pairs.
func statusParts(reply []any) (counts, figures []any, ok bool) {
	if len(reply) != 2 {
		return nil, nil, false
	}
	counts, ok = reply[0].([]any)
	if !ok {
		return nil, nil, false
	}
	figures, ok = reply[1].([]any)
	return counts, figures, ok
}
