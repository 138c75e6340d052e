package openaicompat

import (
	"bytes"
	"testing"
)

func TestMayHaveUsage(t *testing.T) {
	cases := []struct {
		chunk string
		want  bool
	}{
		{`data: {"choices":[{"delta":{"content":"hi"}}]}` + "\n\n", false},
		{`data: {"choices":[],"usage":null}` + "\n\n", false},
		{`data: {"choices":[],"usage":{"prompt_tokens":1}}` + "\n\n", true},
		{`data: {"choices":[],"usage" :	{"prompt_tokens":1}}` + "\n\n", true},
		{`data: {"choices":[],"usage":null,"usage":{"prompt_tokens":1}}` + "\n\n", true},
		{`data: {"choices":[],"usage":5}` + "\n\n", false},
		{`data: {"x":"usage","usage":null}` + "\n\n", false},
		// Only a key counts: usage" without its opening quote is not one.
		{`data: {"xusage":{"prompt_tokens":1},"usage":null}` + "\n\n", false},
		{`data: {"usage":null,"xusage":{"prompt_tokens":1}}` + "\n\n", false},
		// The JSON goes on in the next data line: undecided, so yes.
		{"data: {\"usage\":\ndata: {\"prompt_tokens\":1}}\n\n", true},
		{"data: {\"usage\"\ndata: :{\"prompt_tokens\":1}}\n\n", true},
		// Other spellings encoding/json matches, next to an exact "usage".
		{`data: {"x":"usage","Usage":{"prompt_tokens":1}}` + "\n\n", true},
		{`data: {"x":"usage","uſage":{"prompt_tokens":1}}` + "\n\n", true},
		{`data: {"x":"usage","u\u0073age":{"prompt_tokens":1}}` + "\n\n", true},
		// A capital elsewhere does not count; the word itself, even in
		// content, is taken for a key (conservative: the scan decides).
		{`data: {"content":"Sage advice","usage":null}` + "\n\n", false},
		{`data: {"content":"Usage","usage":null}` + "\n\n", true},
		// No exact "usage" at all: sseUsage finds none whatever follows.
		{`data: {"Usage":{"prompt_tokens":1}}` + "\n\n", false},
	}
	for _, c := range cases {
		if got := mayHaveUsagePlain([]byte(c.chunk)); got != c.want {
			t.Errorf("mayHaveUsagePlain(%q) = %v, want %v", c.chunk, got, c.want)
		}
		if got := mayHaveUsage([]byte(c.chunk)); got != c.want {
			t.Errorf("mayHaveUsage(%q) = %v, want %v", c.chunk, got, c.want)
		}
		// Whatever it says, false must mean sseUsage finds nothing.
		checkMayHaveUsage(t, []byte(c.chunk))
	}
}

// checkMayHaveUsage holds mayHaveUsage to sseUsage: when it says no, no
// event in chunk yields a usage.
func checkMayHaveUsage(t *testing.T, chunk []byte) {
	t.Helper()
	if mayHaveUsage(chunk) {
		return
	}
	_ = forEachEvent(chunk, func(data []byte) error {
		if u := sseUsage(data); u != nil {
			t.Fatalf("mayHaveUsage(%q) = false, but an event has usage %v", chunk, u)
		}
		return nil
	})
}

// FuzzMayHaveUsage: for any bytes, as whole events or cut anywhere, a "no"
// from the pre-check is never wrong.
func FuzzMayHaveUsage(f *testing.F) {
	for _, s := range []string{
		`{"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"Usage":{"prompt_tokens":1},"usage":null}`,
		`{"usage":null,"USAGE":{"completion_tokens":2}}`,
		`{"usage":null,"u\u0073age":{"prompt_tokens":1}}`, `{"usage":null,"uſage":{"prompt_tokens":1}}`,
		`{"usage":null,"uſAge":{"prompt_tokens":1}}`, `{"usage":null,"\u0055SAGE":{"prompt_tokens":1}}`,
		`{"x":"\"usage\":{\"prompt_tokens\":1}","usage":null}`,
		` { "usage" : { "prompt_tokens" : 1 } , "z" : [ ] } `, `{"usage":{}}`, `{"usage":[]}`,
	} {
		f.Add([]byte("data: "+s+"\n\n"), uint8(0))
		f.Add([]byte("data: "+s+"\n\n"), uint8(9))
	}
	f.Fuzz(func(t *testing.T, chunk []byte, cut uint8) {
		checkMayHaveUsage(t, chunk)
		if got, want := hasFoldedUsage(chunk), hasFoldedUsageAnywhere(chunk); got != want {
			t.Fatalf("hasFoldedUsage(%q) = %v, trying every start says %v", chunk, got, want)
		}
		if got, want := mayHaveUsage(chunk), mayHaveUsagePlain(chunk); got != want {
			t.Fatalf("mayHaveUsage(%q) = %v, its plain form says %v", chunk, got, want)
		}
		// Split the JSON over two data lines at cut, as an upstream may.
		if i := int(cut); i < len(chunk) {
			two := append(append(append([]byte(nil), chunk[:i]...), "\ndata: "...), chunk[i:]...)
			checkMayHaveUsage(t, two)
		}
	})
}

// mayHaveUsagePlain is mayHaveUsage written as its comment reads, each
// search the plain one: every exact "usage" key is tried, and the other
// spellings at every start.
func mayHaveUsagePlain(chunk []byte) bool {
	key := []byte(`"usage"`)
	exact := false
	for i := range chunk {
		if bytes.HasPrefix(chunk[i:], key) {
			exact = true
			if usageObjectFollows(chunk[i+len(key):]) {
				return true
			}
		}
	}
	return exact && (bytes.Contains(chunk, []byte(`\u00`)) || bytes.Contains(chunk, []byte(`\u017`)) || hasFoldedUsageAnywhere(chunk))
}

// hasFoldedUsageAnywhere is hasFoldedUsage's specification, tried at every
// start: some spelling of "usage" that is not the lower-case one.
func hasFoldedUsageAnywhere(b []byte) bool {
	for start := range b {
		if n := foldedUsageAt(b[start:]); n > 0 && string(b[start:start+n]) != "usage" {
			return true
		}
	}
	return false
}

// hasFoldedUsage finds a spelling wherever its g or G falls, at either
// end of the chunk, next to other spellings and plain "usage".
func TestHasFoldedUsage(t *testing.T) {
	for _, c := range []string{
		"", "g", "G", "usage", "usag", "sage", "Usage", "USAGE", "usaGe", "uſage", "uſaGe", "Uſage",
		"usageusage", "usageUsage", "Usageusage", "uusage", "uuſage", "xusaGex", "u\u0073age",
		"ſage", "uſag", "uſ", "gusage", "usagg", "Sage advice", "use age", "USAG", "sAGE",
		`"logprobs":null,"usage":null`, `"logprobs":null,"usagE":null`,
	} {
		if got, want := hasFoldedUsage([]byte(c)), hasFoldedUsageAnywhere([]byte(c)); got != want {
			t.Errorf("hasFoldedUsage(%q) = %v, want %v", c, got, want)
		}
	}
	// Every case pattern of "usage" and of "uſage", alone and embedded.
	for mask := range 1 << 5 {
		word := []byte("usage")
		for i := range word {
			if mask&(1<<i) != 0 {
				word[i] -= 'a' - 'A'
			}
		}
		long := bytes.Replace(word, []byte{word[1]}, []byte("ſ"), 1)
		for _, w := range [][]byte{word, long} {
			for _, in := range [][]byte{w, append(append([]byte("gg"), w...), 'g')} {
				want := mask != 0 || bytes.Contains(w, []byte("ſ"))
				if got := hasFoldedUsage(in); got != want {
					t.Errorf("hasFoldedUsage(%q) = %v, want %v", in, got, want)
				}
			}
		}
	}
}

// BenchmarkMayHaveUsage is the check of one vLLM chunk of a stream that
// asked for usage: its "usage":null leads to the search for other
// spellings.
func BenchmarkMayHaveUsage(b *testing.B) {
	chunk := []byte(`data: {"id":"chatcmpl-8f1c2b7e9d4a4f0c9b6e1a2d3c4b5a69","object":"chat.completion.chunk",` +
		`"created":1735689600,"model":"bench-model","choices":[{"index":0,"delta":{"content":" tokens"},` +
		`"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if mayHaveUsage(chunk) {
			b.Fatal("a chunk without usage may have one")
		}
	}
}
