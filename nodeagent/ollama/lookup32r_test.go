package ollama

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An answer without capabilities (an Ollama older than the field) read
// whole just as its run was cancelled is remembered for toolSupportTTL
// like any answer: the next run asks no second time.
func TestTextToolsOldServerAnswerKeptWhenItsRunIsCancelled(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", holdEnd(http.StatusOK, showNoCapabilities))
	f.handle("/api/chat", ndjson(chatLineThe, chatLineFinal))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	setToolLookupTimeout(t, time.Minute) // the lookup ends by the cancellation alone
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelOnceRead(ctx, inst, len(showNoCapabilities), cancel)
	shows := countShows(inst)
	before := time.Now()
	_, err := inst.Run(ctx, &iop.RunRequest{Operation: adapter.OpChat, Target: "gemma:2b", Input: testinput.Chat(toolChat)}, newSink())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the run's cancellation", err)
	}
	f.show(t)
	e, ok := entryOf(inst, "gemma:2b")
	if !ok || !e.native || e.until.Before(before.Add(toolSupportTTL)) {
		t.Fatalf("entry %+v (%v), want native for toolSupportTTL", e, ok)
	}
	if _, _, err := runTarget(t, inst, "gemma:2b", toolChat); err != nil {
		t.Fatal(err)
	}
	if n := shows.Load(); n != 1 {
		t.Fatalf("%d lookups, want the cancelled run's alone", n)
	}
}
