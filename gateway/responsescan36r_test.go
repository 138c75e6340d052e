package gateway

import (
	"strings"
	"testing"
)

// A hostile or slow upstream that sends its answer's beginning a byte at
// a time costs the id scan one pass and one decoding, not one decoding
// (a json.Decoder, a copy of all so far) per piece: 4 KiB in 1-byte
// pieces allocates a handful of times, not thousands.
func TestResponseIDScanPiecewiseCost36r(t *testing.T) {
	pad := strings.Repeat("x", responseIDScanMax-200)
	for _, c := range []struct {
		name, answer string
		sse          bool
	}{
		{"stream", "event: response.created\ndata: {\"response\":{\"instructions\":\"" + pad + "\",\"id\":\"resp_abc\"}}\n\n", true},
		{"body", `{"instructions":"` + pad + `","id":"resp_abc"}`, false},
	} {
		run := func(piece int) (id string, allocs float64) {
			allocs = testing.AllocsPerRun(1, func() {
				s := newResponseIDScan(c.sse)
				done := false
				for b := []byte(c.answer); len(b) > 0 && !done; {
					n := min(piece, len(b))
					id, done = s.feed(b[:n])
					b = b[n:]
				}
				if !done {
					id = s.end()
				}
			})
			return id, allocs
		}
		whole, wholeAllocs := run(len(c.answer))
		bytewise, allocs := run(1)
		if whole != "resp_abc" || bytewise != "resp_abc" {
			t.Errorf("%s: id %q whole, %q bytewise; want resp_abc", c.name, whole, bytewise)
		}
		// The buffer's growth from its first 512 bytes to 4 KiB: three more.
		if allocs > wholeAllocs+4 {
			t.Errorf("%s: %v allocations for %d one-byte pieces, %v whole: want about the same", c.name, allocs, len(c.answer), wholeAllocs)
		}
	}
}

// The scan's bound is 4 KiB of the answer: an id that has ended by then
// is found, one that ends after it is not.
func TestResponseIDScanBound36r(t *testing.T) {
	for _, c := range []struct {
		at   int // where the answer's id member starts
		want string
	}{
		{4000, "resp_abc"},
		{4096 + 100, ""},
	} {
		body := `{"instructions":"` + strings.Repeat("x", c.at-len(`{"instructions":"",`)) + `","id":"resp_abc"}`
		stream := "data: {\"response\":" + body + "}\n\n"
		for _, a := range []struct {
			answer string
			sse    bool
		}{{body, false}, {stream, true}} {
			s := newResponseIDScan(a.sse)
			id, done := s.feed([]byte(a.answer))
			if !done {
				id = s.end()
			}
			if id != c.want {
				t.Errorf("id at %d (stream %v): %q, want %q", c.at, a.sse, id, c.want)
			}
		}
	}
}

// An event stream's first data line settles the scan the moment its line
// break arrives, and not before: the id is remembered while the stream
// goes on, whatever comes after it.
func TestResponseIDScanSettlesOnLineBreak36r(t *testing.T) {
	first := "event: response.created\r\ndata:{\"type\":\"response.created\",\"response\":{\"id\":\"resp_\\u0061bc\"}}"
	s := newResponseIDScan(true)
	for i := range len(first) {
		if _, done := s.feed([]byte(first[i : i+1])); done {
			t.Fatalf("done after %d bytes, before the data line's end", i+1)
		}
	}
	if id, done := s.feed([]byte("\r\n\r\nevent: response.in_progress\n")); !done || id != "resp_abc" {
		t.Fatalf("at the line break: %q, %v; want resp_abc, done", id, done)
	}
	// An answer that ends inside its first data line: end reads what came.
	s = newResponseIDScan(true)
	if _, done := s.feed([]byte(first)); done {
		t.Fatal("done before the line break")
	}
	if id := s.end(); id != "resp_abc" {
		t.Fatalf("end: %q", id)
	}
}
