package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Responses API follow-ups across edges. A server such as vLLM keeps the
// responses it answered in its own memory, so a follow-up naming one
// (previous_response_id) must reach the provider that answered it,
// whichever edge the balancer sends it to. Each edge records the ids its
// providers answer as <prefix>:resp:<id>, a string holding the resource's
// Key (as Key spells it, whatever the prefix), set only if absent (the
// first answerer keeps it) and expiring with the edge's own memory of it.
//
// The id is the key's tail as the upstream sent it, raw: Redis keys are
// binary safe, and the fixed "<prefix>:resp:" before it (a prefix has no
// ':') keeps any id, whatever its bytes, among these keys, never another
// deployment's or another kind's. A key costs the id's bytes (at most
// what the caller bounds: dispatch.MaxResponseIDBytes) plus the value's.

// MaxResponseOwnerBytes bounds the value ResponseOwner reads: a value
// longer than this (no resource's Key, another program's data) is read
// no further and names no resource.
const MaxResponseOwnerBytes = 1024

// ResponseOwner pairs a Responses API response id with the Key of the
// resource that answered it.
type ResponseOwner struct {
	ID, Key string
}

// responseKey is where id's owner is kept.
func (l *Ledger) responseKey(id string) string { return l.prefix + ":resp:" + id }

// RememberResponses records each owner (SET NX EX ttl: an id another
// edge recorded first keeps its owner, and its expiry) in one round trip
// bounded by the ledger's timeout. A ttl under a second counts as one
// second. It fails with ErrUnavailable when Redis does not answer (some
// may have been recorded) and ErrRefused when it refuses some (out of
// memory, a read-only replica): the ids it refused are not recorded.
func (l *Ledger) RememberResponses(ctx context.Context, owners []ResponseOwner, ttl time.Duration) error {
	if len(owners) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	ttl = max(ttl.Truncate(time.Second), time.Second) // EX, not PX: whole seconds suffice
	pipe := l.rdb.Pipeline()
	for _, o := range owners {
		pipe.SetNX(ctx, l.responseKey(o.ID), o.Key, ttl)
	}
	cmds, err := pipe.Exec(ctx)
	if err == nil || errors.Is(err, redis.Nil) {
		return nil
	}
	if answered(cmds) {
		return fmt.Errorf("%w: remember responses: %w", ErrRefused, err)
	}
	return fmt.Errorf("%w: remember responses: %w", ErrUnavailable, err)
}

// ResponseOwner is the Key of the resource that answered response id, as
// some edge recorded it (RememberResponses), or "" when none did (or the
// value is longer than MaxResponseOwnerBytes). One round trip, bounded by
// the ledger's timeout and ctx. It reads at most MaxResponseOwnerBytes+1
// bytes of the value (GETRANGE), whatever another program stored there.
// ErrRefused when Redis answers with an error reply (a key of another
// type), else ErrUnavailable.
func (l *Ledger) ResponseOwner(ctx context.Context, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	// GETRANGE answers "" for a missing key, as for an empty value.
	v, err := l.rdb.GetRange(ctx, l.responseKey(id), 0, MaxResponseOwnerBytes).Result()
	if err != nil {
		return "", fmt.Errorf("%w: response owner: %w", failureClass(err), err)
	}
	if len(v) > MaxResponseOwnerBytes {
		return "", nil
	}
	return v, nil
}
