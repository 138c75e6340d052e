// Package clustertest holds the test helpers that the tests of package
// cluster and of its users share. Only tests import it.
package clustertest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Pauser is a go-redis hook: while on (MS > 0) it pauses the Redis server
// for MS milliseconds (CLIENT PAUSE ... ALL, sent by another client, which
// Redis answers at once) before each command or pipeline of the client it
// is added to, handshakes included. Each of that client's round trips then
// takes at least MS, as on a Redis slow to answer: every reply arrives,
// each within the timeout when MS is below it.
//
// Trips counts the round trips (commands and pipelines) it saw.
type Pauser struct {
	MS, Trips atomic.Int64
	t         testing.TB
	by        *redis.Client
}

// NewPauser is a Pauser, off, that pauses the server through by. by's own
// connection is made now: its dial and handshake, unpaused, would
// otherwise run in the hook of the first paused call, within that call's
// deadline.
func NewPauser(t testing.TB, by *redis.Client) *Pauser {
	t.Helper()
	if err := by.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return &Pauser{t: t, by: by}
}

func (p *Pauser) pause() {
	p.Trips.Add(1)
	if ms := p.MS.Load(); ms > 0 {
		if err := p.by.Do(context.Background(), "CLIENT", "PAUSE", ms, "ALL").Err(); err != nil {
			p.t.Error(err)
		}
	}
}

// DialHook leaves dials alone.
func (p *Pauser) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook pauses before each command.
func (p *Pauser) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		p.pause()
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook pauses before each pipeline.
func (p *Pauser) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.pause()
		return next(ctx, cmds)
	}
}
