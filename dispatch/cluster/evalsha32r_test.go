package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// onNoScript is a go-redis hook that calls do (on the caller's
// goroutine) when a pipeline comes back with a NOSCRIPT reply.
type onNoScript struct{ do func() }

func (onNoScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (onNoScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h onNoScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if noScript(c.Err()) {
				h.do()
				break
			}
		}
		return err
	}
}

// The round trip that sends the bodies again after NOSCRIPT keeps to
// Apply's context: cancelled once the first replies are in, the batch is
// ErrUnavailable (not all of it ran) and the return is not sent again
// behind the caller's back (the shutdown flush's bound holds).
func TestApplyNoScriptResendKeepsToItsContext(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	key := Key("n", "p")
	id := takeN(t, l, key, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.rdb.AddHook(onNoScript{do: cancel})
	if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: key, ID: id}})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("apply cancelled between its round trips: %v, want %v", err, ErrUnavailable)
	}
	if !inSet(t, rdb, key, id) {
		t.Fatal("the return was sent again after its context was cancelled")
	}
}
