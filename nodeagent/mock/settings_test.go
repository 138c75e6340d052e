package mock

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// delay_ms takes 0 to one hour inclusive; -1 is as negative as -5.
func TestDelayBounds(t *testing.T) {
	for v, ok := range map[string]bool{"-1": false, "0": true, "3600000": true, "3600001": false} {
		_, err := New(&iop.AdapterConfig{Settings: map[string]string{SettingDelayMS: v}}, adapter.Env{})
		if ok != (err == nil) {
			t.Errorf("delay_ms %q: err = %v, want accepted %v", v, err, ok)
		}
	}
}

// cancelSink cancels its run on the first delta.
type cancelSink struct {
	cancel context.CancelFunc
	n      int
}

func (s *cancelSink) Delta(string) error { s.n++; s.cancel(); return nil }

// Without a delay, a run cancelled mid-echo stops at the next delta.
func TestCancelWithoutDelayStopsEcho(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &cancelSink{cancel: cancel}
	_, err := newMock(t, nil).Run(ctx, &iop.RunRequest{Operation: adapter.OpChat, Input: testinput.Chat(`{"messages":[{"role":"user","content":"a b c d"}]}`)}, sink)
	if !errors.Is(err, context.Canceled) || sink.n != 1 {
		t.Fatalf("err = %v after %d deltas, want context.Canceled after 1", err, sink.n)
	}
}

// fail_trigger applies to a completion prompt too.
func TestFailTriggerCompletion(t *testing.T) {
	inst := newMock(t, map[string]string{SettingFailTrigger: "fail me"})
	_, deltas, err := run(t, inst, adapter.OpCompletion, `{"prompt":"fail me"}`)
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream || len(deltas) != 1 {
		t.Fatalf("err = %v, deltas = %q", err, deltas)
	}
}

// Embeddings are unit vectors.
func TestEmbeddingsAreUnitVectors(t *testing.T) {
	for _, text := range []string{"", "a", "hello world"} {
		var sum float64
		for _, x := range embed(text) {
			sum += x * x
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("embed(%q): squared norm %v, want 1", text, sum)
		}
	}
}
