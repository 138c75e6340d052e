package anthropicapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// argScan counts brackets without pairing them, so a text like `{]` is
// taken for whole. That text is no prefix of any JSON value, so it can
// only come from an upstream whose arguments are invalid anyway: for
// arguments that are a valid object or array, streamed in any two
// pieces, argScan takes no proper prefix for whole (the bracket count of a
// prefix of a well-nested value is its nesting depth, above zero until the
// value closes) and takes the whole value, with any trailing whitespace,
// for whole. A pairing check would change nothing for such arguments.
func FuzzArgScanPrefix(f *testing.F) {
	for _, s := range []string{
		// Argument texts as vLLM's and OpenAI's streams carry them.
		`{"location": "San Francisco, CA", "unit": "fahrenheit"}`,
		`{"city":"Paris","days":[1,2,{"x":"]}"}]}`,
		`{"path":"a\\\"}b","content":"line\n{[\"]"}`,
		`[{"a":[]},{}]`,
		`{}`,
		"{\"k\":\"\u00e9\u4e2d\"}\n",
	} {
		f.Add(s, len(s)/2)
	}
	f.Fuzz(func(t *testing.T, s string, cut int) {
		v := strings.TrimSpace(s)
		if !json.Valid([]byte(s)) || v == "" || (v[0] != '{' && v[0] != '[') {
			return
		}
		end := strings.Index(s, v) + len(v) // just past the value
		if cut < 0 {
			cut = -cut
		}
		cut %= len(s) + 1
		for i := 0; i <= len(s); i++ {
			var a argScan
			a.feed(s[:min(cut, i)])
			if cut < i {
				a.feed(s[cut:i])
			}
			if want := i >= end; a.complete() != want {
				t.Fatalf("%q fed as %q+%q: complete %v, want %v", s[:i], s[:min(cut, i)], s[min(cut, i):i], a.complete(), want)
			}
		}
	})
}
