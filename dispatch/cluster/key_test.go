package cluster

import "testing"

// Resource keys are distinct for distinct (node, provider) pairs, and no
// key is another's long set; ordinary names keep the plain key.
func TestKeysOfLookalikeResourcesDiffer(t *testing.T) {
	if got := Key("gpu-a", "vllm:qwen"); got != "iop:lease:gpu-a/vllm:qwen" {
		t.Fatalf("an ordinary key changed: %q", got)
	}
	pairs := [][2]string{
		{"a/b", "c"}, {"a", "b/c"}, {"a%2Fb", "c"},
		{"n", "p"}, {"n", "p:long"}, {"n", "p%3Along"}, {"n", "p:long:long"},
		{"n", "p%"}, {"n", "p%25"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		k := Key(p[0], p[1])
		for _, key := range []string{k, k + ":long"} {
			if o, ok := seen[key]; ok {
				t.Fatalf("%q and %q share the key %q", p, o, key)
			}
			seen[key] = p
		}
	}
}
