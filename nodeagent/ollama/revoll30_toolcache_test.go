package ollama

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// expire makes the remembered answer about model out of date, as the
// clock would after its TTL.
func expire(inst *Instance, model string) {
	inst.tools.mu.Lock()
	defer inst.tools.mu.Unlock()
	e := inst.tools.entries[modelKey(model)]
	e.until = time.Now().Add(-time.Second)
	inst.tools.entries[modelKey(model)] = e
}

func untilOf(t *testing.T, inst *Instance, model string) time.Duration {
	t.Helper()
	inst.tools.mu.Lock()
	defer inst.tools.mu.Unlock()
	e, ok := inst.tools.entries[modelKey(model)]
	if !ok {
		t.Fatalf("nothing remembered about %s", model)
	}
	return time.Until(e.until)
}

// A failed lookup holds for toolLookupRetry, not toolSupportTTL, and once
// out of date the model is asked about again.
func TestTextToolsFailedLookupRetried(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusInternalServerError, `{"error":"boom"}`))
	f.handle("/api/chat", ndjson(chatLineToolCall, chatLineToolDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	shows := countShows(inst)
	if _, _, err := runTarget(t, inst, "llama3.2", toolChat); err != nil {
		t.Fatal(err)
	}
	f.request(t)
	if d := untilOf(t, inst, "llama3.2"); d > toolLookupRetry || d <= 0 {
		t.Fatalf("a failed lookup is trusted for %v, want at most %v", d, toolLookupRetry)
	}
	expire(inst, "llama3.2")
	if _, _, err := runTarget(t, inst, "llama3.2", toolChat); err != nil {
		t.Fatal(err)
	}
	f.request(t)
	if n := shows.Load(); n != 2 {
		t.Fatalf("%d lookups, want a second one once the first answer is out of date", n)
	}
}

// An answer out of date is asked again, and the new answer used.
func TestTextToolsAnswerExpires(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusOK, showTools))
	f.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := decodeBody(t, readBody(r))["tools"]; ok {
			ndjson(chatLineToolCall, chatLineToolDone)(w, r)
			return
		}
		ndjson(textCallLines...)(w, r)
	})
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	if _, _, err := runTarget(t, inst, "gemma:2b", toolChat); err != nil {
		t.Fatal(err)
	}
	f.request(t)
	if d := untilOf(t, inst, "gemma:2b"); d > toolSupportTTL || d <= toolLookupRetry {
		t.Fatalf("an answer is trusted for %v, want %v", d, toolSupportTTL)
	}
	// The model is pulled again under its name, without a tool template.
	f.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
	expire(inst, "gemma:2b")
	res, deltas, err := runTarget(t, inst, "gemma:2b", toolChat)
	if err != nil {
		t.Fatal(err)
	}
	wantMarked(t, res, deltas)
	wantTextForm(t, f.request(t).body)
}

// A lookup cut short by its own run's cancellation says nothing about the
// model: it is not remembered, and the next run asks again.
func TestTextToolsCancelledLookupNotRemembered(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f.handle("/api/show", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	f.handle("/api/chat", ndjson(textCallLines...))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // Owner: this test; ends once the lookup reached the server (or after 5 s).
		defer cancel()
		select {
		case <-f.shows:
		case <-time.After(5 * time.Second):
		}
	}()
	_, err := inst.Run(ctx, &iop.RunRequest{Operation: adapter.OpChat, Target: "gemma:2b", Input: testinput.Chat(toolChat)}, newSink())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the run's cancellation", err)
	}
	f.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
	res, deltas, err := runTarget(t, inst, "gemma:2b", toolChat)
	if err != nil {
		t.Fatal(err)
	}
	wantMarked(t, res, deltas)
	wantTextForm(t, f.request(t).body)
}

// An /api/show answer over maxShowBody is not read whole: the lookup fails
// and the run goes native.
func TestTextToolsShowAnswerBounded(t *testing.T) {
	f := newFake(t)
	huge := `{"license":"` + strings.Repeat("x", maxShowBody) + `","capabilities":["completion"]}`
	f.handle("/api/show", jsonStatus(http.StatusOK, huge))
	f.handle("/api/chat", ndjson(chatLineToolCall, chatLineToolDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	if _, _, err := runTarget(t, inst, "gemma:2b", toolChat); err != nil {
		t.Fatal(err)
	}
	if _, ok := decodeBody(t, f.request(t).body)["tools"]; !ok {
		t.Fatal("an answer past the bound was read whole")
	}
}

// At the bound, an expired answer makes room before any current one.
func TestTextToolsCacheEvictsExpiredFirst(t *testing.T) {
	var c toolSupportCache
	now := time.Now()
	c.put(0, "old", false, -time.Second, now)
	for i := range maxToolSupportEntries - 1 {
		c.put(0, fmt.Sprint("m", i), false, time.Minute, now)
	}
	if len(c.entries) != maxToolSupportEntries {
		t.Fatalf("%d entries before the new one", len(c.entries))
	}
	c.put(0, "new", false, time.Minute, now)
	if _, ok := c.entries["old"]; ok {
		t.Fatal("the expired entry was kept")
	}
	if len(c.entries) != maxToolSupportEntries {
		t.Fatalf("%d entries, want %d: a current answer was dropped", len(c.entries), maxToolSupportEntries)
	}
}

// After a Reconfigure, answers are remembered again: a model without tools
// gets the text form from its first run, with one lookup for two runs.
func TestTextToolsCacheWorksAfterReconfigure(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
	f.handle("/api/chat", ndjson(textCallLines...))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	if err := inst.Reconfigure(&iop.AdapterConfig{Type: TypeName, BaseUrl: f.URL}); err != nil {
		t.Fatal(err)
	}
	shows := countShows(inst)
	for range 2 {
		res, deltas, err := runTarget(t, inst, "gemma:2b", toolChat)
		if err != nil {
			t.Fatal(err)
		}
		wantMarked(t, res, deltas)
		wantTextForm(t, f.request(t).body)
	}
	if n := shows.Load(); n != 1 {
		t.Fatalf("%d lookups, want 1", n)
	}
}

// A run on the new config does not wait for, nor take, a lookup against
// the old server: one the old config started before the Reconfigure, or
// one a run still on the old config would start after it.
func TestTextToolsLookupUnderWayDetachedByReconfigure(t *testing.T) {
	t.Run("started before", func(t *testing.T) { testOldLookupDetached(t, false) })
	t.Run("old config after", func(t *testing.T) { testOldLookupDetached(t, true) })
}

func testOldLookupDetached(t *testing.T, after bool) {
	oldSrv := newFake(t)
	release := make(chan struct{})
	oldSrv.handle("/api/show", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			jsonStatus(http.StatusOK, showTools)(w, r)
		case <-r.Context().Done():
		}
	})
	oldSrv.handle("/api/chat", ndjson(chatLineToolCall, chatLineToolDone))
	newSrv := newFake(t)
	newSrv.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
	newSrv.handle("/api/chat", ndjson(textCallLines...))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: oldSrv.URL})
	oldCfg := inst.cfg.Load()
	reconfigure := func() {
		if err := inst.Reconfigure(&iop.AdapterConfig{Type: TypeName, BaseUrl: newSrv.URL}); err != nil {
			t.Fatal(err)
		}
	}
	if after {
		reconfigure()
	}
	first := make(chan error, 1)
	go func() { // Owner: this test; ends once release is closed.
		req := &iop.RunRequest{Operation: adapter.OpChat, Target: "gemma:2b", Input: testinput.Chat(toolChat)}
		_, err := inst.run(context.Background(), oldCfg, req, newSink())
		first <- err
	}()
	defer func() {
		close(release)
		if err := <-first; err != nil {
			t.Error(err)
		}
	}()
	if after {
		// A run still on the old config may go native without asking.
		select {
		case <-oldSrv.shows:
		case c := <-oldSrv.reqs:
			oldSrv.reqs <- c
		case <-time.After(5 * time.Second):
			t.Fatal("the old-config run reached neither endpoint")
		}
	} else {
		oldSrv.show(t) // the old config's lookup is under way
		reconfigure()
	}
	type outcome struct {
		res    *adapter.Result
		deltas []string
		err    error
	}
	second := make(chan outcome, 1)
	go func() { // Owner: this test; ends with its run (at worst once release is closed).
		res, deltas, err := runTarget(t, inst, "gemma:2b", toolChat)
		second <- outcome{res, deltas, err}
	}()
	newSrv.show(t)
	o := <-second
	if o.err != nil {
		t.Fatal(o.err)
	}
	wantMarked(t, o.res, o.deltas)
	wantTextForm(t, newSrv.request(t).body)
}

// tool_mode auto (the default) declares native tools: the text form is
// chosen per model, by the adapter.
func TestTextToolsAutoDeclaresNativeTools(t *testing.T) {
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: "http://127.0.0.1:1"})
	if !inst.Capabilities().GetNativeTools() {
		t.Fatal("tool_mode auto declares no native tools")
	}
}
