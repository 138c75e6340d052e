package config

import (
	"errors"
	"strings"
	"testing"
)

// A document of exactly 1 MiB is taken; one byte more is refused by size.
func TestListKeyDocumentBoundIsInclusive40m(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	const models = `[{name: m2, providers: [{node: a, provider: p, target: y}]}]`
	doc := models + strings.Repeat(" ", maxEnvDocBytes-len(models))
	t.Setenv("IOP_MODELS", doc)
	cfg, err := LoadEdge(f)
	if err != nil {
		t.Fatalf("a document of exactly %d bytes: %v", maxEnvDocBytes, err)
	}
	if len(cfg.Models) != 1 || cfg.Models[0].Name != "m2" {
		t.Fatalf("models %+v, want IOP_MODELS' m2", cfg.Models)
	}
	t.Setenv("IOP_MODELS", doc+" ")
	_, err = LoadEdge(f)
	var pe *ProblemsError
	if !errors.As(err, &pe) || !strings.Contains(strings.Join(pe.Problems, "\n"), "IOP_MODELS (models): 1048577 bytes, at most 1048576") {
		t.Fatalf("one byte over the bound: want the size named, got %v", err)
	}
}

// A document over the bound is refused by its size alone: it is not
// parsed (no second problem about its syntax), and the file's value
// stays (no problem from a value replaced).
func TestOverLongDocumentNotParsed40m(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	t.Setenv("IOP_NODES", "[{id: b"+strings.Repeat(" ", maxEnvDocBytes))
	cfg, err := LoadEdge(f)
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("want problems, got %v (%+v)", err, cfg)
	}
	if len(pe.Problems) != 1 || !strings.HasPrefix(pe.Problems[0], "IOP_NODES (nodes): 1048583 bytes") {
		t.Fatalf("problems %q, want the size alone", pe.Problems)
	}
}

// A document that does not parse is one problem naming its variable and
// key, with neither the parser's "yaml:" prefix nor any part of the
// document the parser quotes (in ', ` or "): a node list holds tokens.
// The file's value stays, so nothing else is reported.
func TestUnparsableDocumentQuotesNothing40m(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	// The parser quotes an unknown anchor's name in '…', the value it
	// cannot decode in `…`, a repeated key in "…".
	t.Setenv("IOP_NODES", "[{id: a, token: *SECRET-anchor}]")
	t.Setenv("IOP_MODELS", "!!int SECRET-value")
	t.Setenv("IOP_AUTH_KEY_PRIORITIES", "{SECRET-key: 1, SECRET-key: 2}")
	_, err := LoadEdge(f)
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("want problems, got %v", err)
	}
	want := []string{
		"IOP_NODES (nodes): not a YAML or JSON document: ",
		"IOP_MODELS (models): not a YAML or JSON document: ",
		"IOP_AUTH_KEY_PRIORITIES (auth.key_priorities): not a YAML or JSON document: ",
	}
	if len(pe.Problems) != len(want) {
		t.Fatalf("problems %q, want the three documents' alone", pe.Problems)
	}
	all := strings.Join(pe.Problems, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("problems lack %q:\n%s", w, all)
		}
	}
	if strings.Contains(all, "SECRET") || strings.Contains(all, "yaml:") {
		t.Errorf("a problem quotes the document or has the parser's prefix:\n%s", all)
	}
}

// A document refused for a repeated key is not taken in part: the parser
// hands back what it read before the repetition (node z here), which
// would replace the file's nodes and leave model m's node a unknown.
// The file's nodes stay, and the repetition is the one problem.
func TestDocumentRefusedNotTakenInPart40m(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	t.Setenv("IOP_NODES", "[{id: z, token: t, providers: [{name: p, type: mock}]}, {id: y, id: y}]")
	_, err := LoadEdge(f)
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("want problems, got %v", err)
	}
	if len(pe.Problems) != 1 || !strings.HasPrefix(pe.Problems[0], "IOP_NODES (nodes): not a YAML or JSON document") {
		t.Fatalf("problems %q, want the document's alone", pe.Problems)
	}
}

// A variable of blanks only (tabs too, which alone do not parse) leaves
// the file's value, as an empty one does.
func TestBlankListVariableKeepsTheFile40m(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	t.Setenv("IOP_MODELS", "\t \n")
	cfg, err := LoadEdge(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Models) != 1 || cfg.Models[0].Name != "m" {
		t.Errorf("models %+v, want the file's", cfg.Models)
	}
}
