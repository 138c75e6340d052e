package ollama

import (
	"net/http"
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Spellings of one name that differ only in case are one model to Ollama
// (since 0.5.2 every model route resolves a name through getExistingName,
// part by part with strings.EqualFold), so they share one /api/show; each
// run still sends the model as its caller wrote it. Before, "Gemma" and
// "gemma" were two keys and two lookups.
func TestTextToolsCaseSpellingsShareOneLookup(t *testing.T) {
	f := newFake(t)
	f.handle("/api/show", jsonStatus(http.StatusOK, showNoTools))
	f.handle("/api/chat", ndjson(textCallLines...))
	inst := newInstance(t, &iop.AdapterConfig{BaseUrl: f.URL})
	shows := countShows(inst)
	runInTextForm(t, f, inst, "Gemma", "gemma", "GEMMA:Latest", "Library/Gemma", "Registry.Ollama.AI/library/gemma:LATEST")
	if n := shows.Load(); n != 1 {
		t.Fatalf("%d lookups, want 1 for every spelling of gemma", n)
	}
}

// runInTextForm runs toolChat on each name in turn, each answered in the
// text form with the model sent as its caller wrote it.
func runInTextForm(t *testing.T, f *fakeOllama, inst *Instance, names ...string) {
	t.Helper()
	for _, name := range names {
		res, deltas, err := runTarget(t, inst, name, toolChat)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wantMarked(t, res, deltas)
		c := f.request(t)
		wantTextForm(t, c.body)
		if got := decodeBody(t, c.body)["model"]; got != name {
			t.Fatalf("model sent as %v, want %s as the caller wrote it", got, name)
		}
	}
}

// The folding is of the key only, exact for the parts Ollama compares
// without case, and never makes a name kept as written (a kind in any
// case, an invalid part, a digest) equal to another's key; a lower-case
// name with its tag still costs no allocation.
func TestModelKeyFoldsCase(t *testing.T) {
	wantModelKeys(t, map[string]string{
		"Gemma:2B":      "gemma:2b",
		"LIBRARY/gemma": "gemma:latest",
		"REGISTRY.OLLAMA.AI/Library/Gemma:Latest": "gemma:latest",
		"Registry.Ollama.AI/JMorgan/Gemma":        "jmorgan/gemma:latest",
		"Host:5000/NS/Model:V1":                   "host:5000/ns/model:v1",
		// Kept as written, case and all.
		"NS/Skill/Model":       "NS/Skill/Model",
		"ns/MCP/model":         "ns/MCP/model",
		"Gemma@sha256:9C5B1A0": "Gemma@sha256:9C5B1A0",
		"Gemma Model":          "Gemma Model",
	})
	if k := modelKey("ns/skill/model"); k == modelKey("NS/Skill/Model") {
		t.Errorf("two kept names share the key %q", k)
	}
	if n := testing.AllocsPerRun(100, func() { _ = modelKey("gemma:2b") }); n != 0 {
		t.Errorf("%v allocations for a lower-case name with its tag", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = modelKey("Gemma") }); n > 1 {
		t.Errorf("%v allocations for a name to fold and complete, want 1", n)
	}
	long := strings.Repeat("M", 80)
	if got := modelKey(long); got != strings.ToLower(long)+":latest" {
		t.Errorf("modelKey(80 M) = %q", got)
	}
}
