package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// scanPieces40b feeds answer to a fresh scan cut at cuts (ascending
// offsets, clamped), settles it at the end as the relay does, and checks
// at every step that the scan holds no more than its bound.
func scanPieces40b(t *testing.T, answer []byte, sse bool, cuts ...int) string {
	t.Helper()
	s := newResponseIDScan(sse)
	prev := 0
	for i, cut := range append(cuts, len(answer)) {
		cut = min(max(cut, prev), len(answer))
		id, done := s.feed(answer[prev:cut])
		if len(s.buf) > responseIDScanMax {
			t.Fatalf("scan holds %d bytes, bound %d", len(s.buf), responseIDScanMax)
		}
		if done {
			return id
		}
		if i == len(cuts) {
			return s.end()
		}
		prev = cut
	}
	panic("unreachable")
}

// duplicateKeys40b reports whether b (valid JSON) has an object with a
// member named twice, or is not valid: where encoding/json's map and the
// scan's first match may take different members.
func duplicateKeys40b(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return true
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				key, ok := k.(string)
				if err != nil || !ok || seen[key] {
					return true
				}
				seen[key] = true
				if walk() {
					return true
				}
			}
			_, err := dec.Token()
			return err != nil
		case json.Delim('['):
			for dec.More() {
				if walk() {
					return true
				}
			}
			_, err := dec.Token()
			return err != nil
		}
		return false
	}
	if walk() {
		return true
	}
	_, err := dec.Token()
	return !errors.Is(err, io.EOF)
}

// referenceID40b is the id encoding/json reads at path from doc, a whole
// JSON document: the string there, else "".
func referenceID40b(doc []byte, path ...string) string {
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return ""
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// FuzzResponseIDScan40b: the Responses id scan reads an upstream's answer
// (hostile or broken), so whatever its bytes and however the transport
// cuts them:
//   - the scan never holds more than responseIDScanMax bytes;
//   - the id does not depend on where the answer was cut;
//   - nothing past the bound matters (an answer and its first
//     responseIDScanMax bytes followed by anything have the same id);
//   - a whole answer within the bound, valid JSON without repeated member
//     names, yields exactly the id encoding/json reads: the top-level "id"
//     of a body, the first data line's response.id of an event stream.
func FuzzResponseIDScan40b(f *testing.F) {
	f.Add([]byte(`{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"completed","output":[]}`), false, uint16(7), uint16(40))
	f.Add([]byte("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_abc\",\"object\":\"response\",\"status\":\"in_progress\"}}\n\n"+
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"delta\":\"Hi\"}\n\n"), true, uint16(30), uint16(31))
	f.Add([]byte(": keep-alive\r\n\r\nevent: response.created\r\ndata:{\"response\":{\"object\":\"id\",\"id\":\"resp_\\u0041\"}}\r\n\r\n"), true, uint16(0), uint16(200))
	f.Add([]byte(`{"object":"response","output":[{"id":"msg_1","content":[]}],"id":"resp_late"}`), false, uint16(3), uint16(3))
	f.Add([]byte(`{"id":{"id":"x"},"id":"y"}`), false, uint16(1), uint16(9))
	f.Add([]byte("data: [DONE]\n\ndata: {\"response\":{\"id\":\"r\"}}\n"), true, uint16(5), uint16(6))
	f.Add([]byte(`{"object":"response","instructions":"`+strings.Repeat("x", responseIDScanMax)+`","id":"resp_past_the_bound"}`), false, uint16(100), uint16(5000))
	f.Fuzz(func(t *testing.T, answer []byte, sse bool, a, b uint16) {
		if len(answer) > 3*responseIDScanMax {
			return
		}
		whole := scanPieces40b(t, answer, sse)
		cuts := []int{int(a) % (len(answer) + 1), int(b) % (len(answer) + 1)}
		if cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		if split := scanPieces40b(t, answer, sse, cuts...); split != whole {
			t.Fatalf("cut at %v: id %q, whole %q", cuts, split, whole)
		}
		if len(answer) >= responseIDScanMax {
			beyond := append(bytes.Clone(answer[:responseIDScanMax]), `"}}]]garbage`...)
			if got := scanPieces40b(t, beyond, sse); got != whole {
				t.Fatalf("bytes past the bound changed the id: %q, then %q", whole, got)
			}
			return
		}
		doc, path := answer, []string{"id"}
		if sse {
			// The first data line: lines end at LF (a CR before it is
			// not part of the line); the last may be unterminated.
			doc, path = nil, []string{"response", "id"}
			for line := range bytes.SplitSeq(answer, []byte("\n")) {
				if v, ok := sseDataValue(bytes.TrimSuffix(line, []byte("\r"))); ok {
					doc = v
					break
				}
			}
		}
		if doc == nil || duplicateKeys40b(doc) {
			return
		}
		if want := referenceID40b(doc, path...); whole != want {
			t.Fatalf("id %q, encoding/json reads %q from %q", whole, want, doc)
		}
	})
}
