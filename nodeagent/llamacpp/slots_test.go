package llamacpp

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// olderSlotsJSON is /slots as llama-server answered it before September
// 2024 (b3600 and earlier): each slot's state is a number, 0 idle and 1
// processing, and there is no is_processing.
func olderSlotsJSON(states ...int) string {
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = fmt.Sprintf(`{"n_ctx":4096,"n_predict":-1,"model":"qwen2.5-0.5b-instruct-q4_k_m.gguf","seed":4294967295,"temperature":0.800000011920929,"id":%d,"id_task":%d,"state":%d,"prompt":"","next_token":{"has_next_token":true,"n_remain":-1,"n_decoded":0,"stopped_eos":false,"stopped_word":false,"stopped_limit":false,"stopping_word":""}}`, i, map[bool]int{true: 7, false: -1}[s != 0], s)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// An older llama-server's slots are counted by their state, as a current
// one's by is_processing.
func TestHealthFromOlderSlotsState(t *testing.T) {
	s := newServer(t)
	in := newInstance(t, s)
	ctx := context.Background()

	s.set(func(s *server) { s.health, s.slots = http.StatusOK, olderSlotsJSON(1, 0) })
	if h := in.Health(ctx); h.Status != adapter.HealthOK || h.Running != 1 || h.Detail != "1 of 2 slots processing" {
		t.Fatalf("one busy slot: %+v", h)
	}
	in.fresh()
	s.set(func(s *server) { s.slots = olderSlotsJSON(1, 1) })
	if h := in.Health(ctx); h.Status != adapter.HealthDegraded || h.Running != 2 {
		t.Fatalf("every slot busy: %+v", h)
	}
}

func TestParseSlotsShapes(t *testing.T) {
	for _, tc := range []struct {
		body        string
		busy, total int
		ok          bool
	}{
		{slotsJSON(true, false, true), 2, 3, true},
		{olderSlotsJSON(0, 1, 1, 0), 2, 4, true},
		// is_processing wins where both are present.
		{`[{"is_processing":false,"state":1},{"is_processing":true,"state":0}]`, 1, 2, true},
		// A state that is not a number is not a count.
		{`[{"state":"busy"}]`, 0, 1, true},
		{`[null]`, 0, 1, true},
		{`[{"is_processing":1}]`, 0, 0, false},
		{`[]`, 0, 0, false},
		{slotsNoSupport, 0, 0, false},
	} {
		busy, total, ok := parseSlots([]byte(tc.body))
		if busy != tc.busy || total != tc.total || ok != tc.ok {
			t.Errorf("%s: busy %d of %d (%v), want %d of %d (%v)", tc.body, busy, total, ok, tc.busy, tc.total, tc.ok)
		}
	}
}
