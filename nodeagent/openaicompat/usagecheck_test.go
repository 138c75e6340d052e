package openaicompat

import "testing"

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
		// Split the JSON over two data lines at cut, as an upstream may.
		if i := int(cut); i < len(chunk) {
			two := append(append(append([]byte(nil), chunk[:i]...), "\ndata: "...), chunk[i:]...)
			checkMayHaveUsage(t, two)
		}
	})
}
