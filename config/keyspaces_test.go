package config

import (
	"strings"
	"testing"
)

// Keys are matched trimmed, so a list written with spaces after its commas
// ("k1, k2", as IOP_AUTH_API_KEYS is most often written) is the same keys:
// a priority for "k2" finds its key, " k1" repeats "k1", and a key of
// spaces alone is empty.
func TestAPIKeysWithSpacesAreTheTrimmedKeys(t *testing.T) {
	c := minimalEdge()
	c.Auth.APIKeys = []string{"k1", " k2"}
	c.Auth.KeyPriorities = []KeyPriority{{Key: "k2 ", Priority: 1}}
	if err := c.Normalize(); err != nil {
		t.Fatalf("refused: %v", err)
	}
	if got := c.Auth.APIKeys[1]; got != "k2" {
		t.Errorf("api_keys[1] = %q, want %q", got, "k2")
	}
	if got := c.Auth.KeyPriorities[0].Key; got != "k2" {
		t.Errorf("key_priorities[0].key = %q, want %q", got, "k2")
	}

	c = minimalEdge()
	c.Auth.APIKeys = []string{"k1", " k1", "  "}
	err := c.Normalize()
	if err == nil {
		t.Fatal("accepted a repeated key and a blank one")
	}
	for _, want := range []string{"auth.api_keys[1] repeats auth.api_keys[0]", "auth.api_keys[2] is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
}

// The same through the environment: IOP_AUTH_API_KEYS="k1, k2" with a
// priority for k2 in the file loads, and k2 is the key.
func TestAPIKeysFromEnvWithSpaces(t *testing.T) {
	f := writeFile(t, "edge.yaml", decodeBase+"auth: {key_priorities: [{key: k2, priority: 1}]}\n")
	t.Setenv("IOP_AUTH_API_KEYS", "k1, k2")
	c, err := LoadEdge(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Auth.APIKeys, "|"); got != "k1|k2" {
		t.Fatalf("api_keys %q, want k1|k2", got)
	}
}
