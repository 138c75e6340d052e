package config

import (
	"errors"
	"strings"
	"testing"
)

// Lists of objects come from the environment as YAML or JSON documents
// (the contract: every config key can be overridden by environment):
// IOP_MODELS replaces the file's models, IOP_NODES its nodes, a block
// document as well as a JSON one, and neither is reported as a variable
// that overrides nothing. Before, both were ignored with a "misspelt?"
// warning.
func TestListKeysFromEnvironment39(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	t.Setenv("IOP_NODES", "- id: b\n  token_env: IOP_NODE_B_TOKEN\n  providers:\n    - {name: q, type: mock}\n")
	t.Setenv("IOP_NODE_B_TOKEN", "tb")
	t.Setenv("IOP_MODELS", `[{"name":"m2","providers":[{"node":"b","provider":"q","target":"x"}]},{"name":"m3","providers":[{"node":"b","provider":"q","target":"y"}]}]`)
	t.Setenv("IOP_AUTH_API_KEYS", "sk-k,sk-l")
	t.Setenv("IOP_AUTH_KEY_PRIORITIES", `[{key: sk-k, priority: 5}]`)
	cfg, err := LoadEdge(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Nodes) != 1 || cfg.Nodes[0].ID != "b" || cfg.Nodes[0].Token != "tb" || cfg.Nodes[0].Providers[0].Name != "q" {
		t.Errorf("nodes %+v, want IOP_NODES' node b", cfg.Nodes)
	}
	if len(cfg.Models) != 2 || cfg.Models[0].Name != "m2" || cfg.Models[1].Providers[0].Target != "y" {
		t.Errorf("models %+v, want IOP_MODELS' m2 and m3", cfg.Models)
	}
	if len(cfg.Auth.KeyPriorities) != 1 || cfg.Auth.KeyPriorities[0].Priority != 5 {
		t.Errorf("key priorities %+v, want IOP_AUTH_KEY_PRIORITIES'", cfg.Auth.KeyPriorities)
	}
	if u := cfg.UnmatchedEnv(); len(u) != 0 {
		t.Errorf("reported as overriding nothing: %v", u)
	}
}

// A document that does not parse is a problem naming its variable and
// key, never quoting it (a node list holds tokens); one that parses into
// the wrong shape is refused by key as the file's would be; both are
// reported with the file's other problems.
func TestListKeyFromEnvironmentRefused39(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase+"limits: {max_body_bytes: -1}\n")
	t.Setenv("IOP_NODES", "[{id: a, token: SECRET-tok, providers: [{name: p, type: mock}]")
	t.Setenv("IOP_MODELS", "just-a-string")
	_, err := LoadEdge(f)
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("want problems, got %v", err)
	}
	all := strings.Join(pe.Problems, "\n")
	for _, want := range []string{"IOP_NODES (nodes): not a YAML or JSON document", "models", "limits.max_body_bytes"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "SECRET") {
		t.Errorf("a problem quotes the variable's value:\n%s", all)
	}
}

// An empty variable leaves the file's value (as for a scalar key).
func TestEmptyListVariableKeepsTheFile39(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	t.Setenv("IOP_MODELS", "  ")
	cfg, err := LoadEdge(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Models) != 1 || cfg.Models[0].Name != "m" {
		t.Errorf("models %+v, want the file's", cfg.Models)
	}
}

// A document over 1 MiB is refused by size before it is parsed.
func TestListKeyDocumentBounded39(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase)
	t.Setenv("IOP_MODELS", "["+strings.Repeat(" ", maxEnvDocBytes)+"]")
	_, err := LoadEdge(f)
	var pe *ProblemsError
	if !errors.As(err, &pe) || !strings.Contains(strings.Join(pe.Problems, "\n"), "IOP_MODELS (models): 1048578 bytes, at most 1048576") {
		t.Fatalf("want the size named, got %v", err)
	}
}
