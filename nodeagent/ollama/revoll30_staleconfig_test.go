package ollama

import (
	"context"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A run that loaded its config before a Reconfigure finishes against the
// old server; what that server says of a model (here: no tools) is not
// remembered for the new server, whose runs ask it themselves.
func TestTextToolsStaleConfigLookupNotRemembered(t *testing.T) {
	oldSrv := newFake(t)
	oldSrv.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
	oldSrv.handle("/api/chat", ndjson(textCallLines...))
	newSrv := newFake(t)
	newSrv.handle("/api/chat", ndjson(chatLineToolCall, chatLineToolDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: oldSrv.URL})
	oldCfg := inst.cfg.Load() // as Run loads it, just before the Reconfigure
	if err := inst.Reconfigure(&iop.AdapterConfig{Type: TypeName, BaseUrl: newSrv.URL}); err != nil {
		t.Fatal(err)
	}
	req := &iop.RunRequest{Operation: adapter.OpChat, Target: "gemma:2b", Input: testinput.Chat(toolChat)}
	if _, err := inst.run(context.Background(), oldCfg, req, newSink()); err != nil {
		t.Fatalf("run on the old config: %v", err)
	}
	oldSrv.request(t)

	if _, _, err := runTarget(t, inst, "gemma:2b", toolChat); err != nil {
		t.Fatal(err)
	}
	if _, ok := decodeBody(t, newSrv.request(t).body)["tools"]; !ok {
		t.Fatal("the old server's answer was used for the new one: tools not sent natively")
	}
	newSrv.show(t)
}

// The same for a refusal of native tools seen by a run on the old config.
func TestTextToolsStaleConfigRefusalNotRemembered(t *testing.T) {
	oldSrv := newFake(t)
	oldSrv.handle("/api/show", jsonStatus(http.StatusOK, showNoCapabilities))
	textAnswer := ndjson(textCallLines...)
	oldSrv.handle("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := decodeBody(t, readBody(r))["tools"]; ok {
			jsonStatus(http.StatusBadRequest, noToolsError)(w, r)
			return
		}
		textAnswer(w, r)
	})
	newSrv := newFake(t)
	newSrv.handle("/api/show", jsonStatus(http.StatusOK, showNoCapabilities))
	newSrv.handle("/api/chat", ndjson(chatLineToolCall, chatLineToolDone))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: oldSrv.URL})
	oldCfg := inst.cfg.Load()
	if err := inst.Reconfigure(&iop.AdapterConfig{Type: TypeName, BaseUrl: newSrv.URL}); err != nil {
		t.Fatal(err)
	}
	req := &iop.RunRequest{Operation: adapter.OpChat, Target: "gemma:2b", Input: testinput.Chat(toolChat)}
	res, err := inst.run(context.Background(), oldCfg, req, newSink())
	if err != nil {
		t.Fatalf("run on the old config: %v", err)
	}
	if res.Metadata[adapter.MetaTextToolFallback] != "true" {
		t.Fatalf("old-config run not retried in the text form: %v", res.Metadata)
	}
	oldSrv.request(t)
	oldSrv.request(t)

	if _, _, err := runTarget(t, inst, "gemma:2b", toolChat); err != nil {
		t.Fatal(err)
	}
	if _, ok := decodeBody(t, newSrv.request(t).body)["tools"]; !ok {
		t.Fatal("the old server's refusal was remembered for the new one")
	}
}
