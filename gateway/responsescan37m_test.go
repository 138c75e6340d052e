package gateway

import (
	"strings"
	"testing"
)

// scanAll feeds answer to a fresh scan in one piece and settles it as
// the relay does at the answer's end.
func scanAll(answer string, sse bool) string {
	s := newResponseIDScan(sse)
	id, done := s.feed([]byte(answer))
	if !done {
		id = s.end()
	}
	return id
}

// Only the answer's own id is taken, read as JSON reads it: a member of
// the top-level object (of the response object, in a stream's first
// event), never an "id" a hostile or odd upstream puts elsewhere — a
// string value spelt "id", an object's id nested in an earlier member or
// in the id member itself, or an array's elements. Each would otherwise
// pin the conversation's follow-ups to a provider by an id it never
// answered.
func TestResponseIDScanTakesOnlyTheMember37m(t *testing.T) {
	for _, c := range []struct {
		name, body, want string
	}{
		{"a value spelt id before it", `{"object":"id","id":"resp_real"}`, "resp_real"},
		{"an earlier member's own id", `{"item":{"id":"msg_1"},"id":"resp_real"}`, "resp_real"},
		{"an id that is an object", `{"id":{"id":"resp_inner"}}`, ""},
		{"an id that is a number", `{"id":7,"x":"id","y":"resp_no"}`, ""},
		{"an array", `["id","resp_elem"]`, ""},
	} {
		if got := scanAll(c.body, false); got != c.want {
			t.Errorf("body, %s: %s: id %q, want %q", c.name, c.body, got, c.want)
		}
		stream := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":" + c.body + "}\n\n"
		if got := scanAll(stream, true); got != c.want {
			t.Errorf("stream, %s: %s: id %q, want %q", c.name, c.body, got, c.want)
		}
	}
	// The stream's own top level is read as the body's is.
	if got := scanAll("data: [\"response\",{\"id\":\"resp_elem\"}]\n\n", true); got != "" {
		t.Errorf("stream of an array: id %q, want none", got)
	}
}

// The scan settles the moment its bound is reached, in the piece that
// reaches it, not at the answer's end: an answer cut off later (its
// provider failed mid-stream) has still had its id read. A stream whose
// first line runs past the bound, and a whole body, alike.
func TestResponseIDScanSettlesAtTheBound37m(t *testing.T) {
	pad := strings.Repeat("x", responseIDScanMax)
	for _, c := range []struct {
		answer string
		sse    bool
	}{
		{`{"id":"resp_abc","instructions":"` + pad + `"}`, false},
		{`data: {"response":{"id":"resp_abc","instructions":"` + pad + `"}}` + "\n\n", true},
	} {
		s := newResponseIDScan(c.sse)
		b := []byte(c.answer)
		id, done := s.feed(b[:responseIDScanMax-1])
		if done {
			t.Fatalf("stream %v: settled a byte short of the bound (%q)", c.sse, id)
		}
		id, done = s.feed(b[responseIDScanMax-1 : responseIDScanMax+10])
		if !done || id != "resp_abc" {
			t.Errorf("stream %v: at the bound: id %q, done %v; want resp_abc, done", c.sse, id, done)
		}
	}
}

// Once the relay's scan has the answer's id it is dropped: the frames
// after it cost the relay nothing. Kept, it would decode its 4 KiB again
// for every frame of a long answer (each settles it anew).
func TestRelayDropsTheScanOnceSettled37m(t *testing.T) {
	for _, sse := range []bool{false, true} {
		x := &tunnelExchange{s: &Server{}, ids: newResponseIDScan(sse)}
		first := `{"id":"resp_abc","instructions":"` + strings.Repeat("x", responseIDScanMax) + `"}`
		if sse {
			first = "data: {\"response\":" + first + "}\n\n"
		}
		x.scanID([]byte(first), false)
		frame := []byte("data: {\"type\":\"response.output_text.delta\",\"delta\":\"more\"}\n\n")
		allocs := testing.AllocsPerRun(100, func() {
			if x.ids != nil {
				x.scanID(frame, false)
			}
		})
		if allocs != 0 {
			t.Errorf("stream %v: %v allocations per frame after the id was found, want none", sse, allocs)
		}
	}
}
