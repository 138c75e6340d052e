package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// revretReply is an error reply as go-redis reports one (redis.Error).
type revretReply string

func (e revretReply) Error() string { return string(e) }
func (revretReply) RedisError()     {}

// refusedBy is Apply's error for a batch refused with reply.
func refusedBy(reply string) error {
	return fmt.Errorf("%w: apply: %w", ErrRefused, revretReply(reply))
}

// A kind of refusal is warned of again once RefusalLogEvery has passed
// since its last warning (not later), and that warning counts the
// batches and updates refused meanwhile, which were told only at debug
// level, with its own.
func TestRefusalLogCountsTheBatchesItHeldBack(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	var r RefusalLog
	err := refusedBy("WRONGTYPE Operation against a key holding the wrong kind of value")
	t0 := time.Now()
	r.Record(log, 2, err, t0)
	r.Record(log, 3, err, t0.Add(time.Second))
	r.Record(log, 4, err, t0.Add(RefusalLogEvery))
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 2 {
		t.Fatalf("%d warnings, want 2 (the first refusal, and one a RefusalLogEvery later)", len(warns))
	}
	f := warns[1].ContextMap()
	if f["kind"] != "WRONGTYPE" || f["batches"] != int64(2) || f["updates"] != int64(7) {
		t.Fatalf("second warning: kind %v, %v batches, %v updates; want WRONGTYPE, 2, 7", f["kind"], f["batches"], f["updates"])
	}
}

// At most maxRefusalKinds kinds of reply are told apart; the rarer ones
// share the kind "other", so replies of ever new kinds neither grow the
// log's memory nor its warnings past one a kind a RefusalLogEvery.
func TestRefusalLogKindsAreBounded(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	log := zap.New(core)
	var r RefusalLog
	now := time.Now()
	for i := range 3 * maxRefusalKinds {
		r.Record(log, 1, refusedBy(fmt.Sprintf("KIND%d refused", i)), now)
	}
	if len(r.kinds) != maxRefusalKinds+1 || r.kinds["other"] == nil {
		t.Fatalf("%d kinds kept (other: %v), want %d and other", len(r.kinds), r.kinds["other"] != nil, maxRefusalKinds)
	}
	if n := logs.Len(); n != maxRefusalKinds+1 {
		t.Fatalf("%d warnings for %d kinds at once, want %d", n, 3*maxRefusalKinds, maxRefusalKinds+1)
	}
}

// A reply's kind is its first word, cut at maxReplyKind bytes: a reply
// that is one long word does not make a long log field.
func TestReplyKindIsItsFirstWordBounded(t *testing.T) {
	if k := ReplyKind(refusedBy("OOM command not allowed")); k != "OOM" {
		t.Fatalf("kind %q, want OOM", k)
	}
	if k := ReplyKind(refusedBy(strings.Repeat("X", 10*maxReplyKind))); len(k) != maxReplyKind {
		t.Fatalf("kind of %d bytes, want %d", len(k), maxReplyKind)
	}
	if k := ReplyKind(fmt.Errorf("%w: apply: %w", ErrUnavailable, fmt.Errorf("i/o timeout"))); k != "" {
		t.Fatalf("kind %q of an error with no reply, want none", k)
	}
}

// Refusals held back after a warning are warned of by Flush once
// RefusalLogEvery has passed since it (Due), though no refusal of their
// kind follows; before then Flush leaves them, and after it nothing is
// due.
func TestRefusalLogFlushWarnsOfWhatItHeldBack(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	log := zap.New(core)
	var r RefusalLog
	err := refusedBy("READONLY You can't write against a read only replica.")
	t0 := time.Now()
	r.Record(log, 1, err, t0)
	if due := r.Due(); !due.IsZero() {
		t.Fatalf("due at %v with nothing held back", due)
	}
	r.Record(log, 3, err, t0.Add(time.Second))
	if due := r.Due(); !due.Equal(t0.Add(RefusalLogEvery)) {
		t.Fatalf("due at %v, want a RefusalLogEvery after the warning", due.Sub(t0))
	}
	r.Flush(log, t0.Add(-time.Nanosecond), t0.Add(2*time.Second))
	if logs.Len() != 1 {
		t.Fatalf("%d warnings before a RefusalLogEvery passed, want 1", logs.Len())
	}
	r.Flush(log, t0, t0.Add(RefusalLogEvery))
	warns := logs.All()
	if len(warns) != 2 {
		t.Fatalf("%d warnings after the flush, want 2", len(warns))
	}
	if f := warns[1].ContextMap(); f["kind"] != "READONLY" || f["batches"] != int64(1) || f["updates"] != int64(3) {
		t.Fatalf("flushed warning: kind %v, %v batches, %v updates; want READONLY, 1, 3", f["kind"], f["batches"], f["updates"])
	}
	if due := r.Due(); !due.IsZero() {
		t.Fatalf("due at %v after the flush", due)
	}
}
