package config

import (
	"reflect"
	"strings"
)

// providerKeys are the keys of nodes[].providers[] the edge itself reads.
// Every other key there is passed to the node as an adapter setting, and
// the openai_compat and vllm adapters read none: a misspelt capacity or
// tool_mode would be dropped with no word anywhere.
var providerKeys = structKeys(reflect.TypeFor[ProviderSpec]())

func structKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		tag := strings.Split(t.Field(i).Tag.Get("mapstructure"), ",")[0]
		if tag != "" && tag != "-" {
			keys = append(keys, tag)
		}
	}
	return keys
}

// nearKey returns the provider key that k is a slip of (case, '-' for
// '_', one or two letters off), or "". Exact keys never reach here: they
// are decoded into their fields.
func nearKey(k string) string {
	norm := strings.ReplaceAll(strings.ToLower(k), "-", "_")
	for _, want := range providerKeys {
		// One edit for short keys (name, type), two for the rest: no
		// adapter setting is that close to a provider key.
		allowed := 1
		if len(want) > 5 {
			allowed = 2
		}
		if editDistance(norm, want) <= allowed {
			return want
		}
	}
	return ""
}

// editDistance is the optimal string alignment distance of a and b
// (insertions, deletions, substitutions, adjacent swaps), on bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b)) // not a slip of any key
	}
	var rows [3][65]int
	prev2, prev, cur := &rows[0], &rows[1], &rows[2]
	for j := 0; j <= len(b); j++ {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
