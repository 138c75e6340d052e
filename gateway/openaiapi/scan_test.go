package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"testing"
)

// FuzzScan checks scanObject and appendElements against encoding/json, their
// model: on valid JSON they must succeed exactly when json.Unmarshal does
// and yield the same members and elements; on anything else they must not
// panic (and their callers fall back to encoding/json when they refuse).
// The member scanObject flags is the first top-level key, in the body's
// order, that is a case variant of a name it checks, or failing one the
// first of those names to come a second time (members.go).
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, ` { "a" : 1 , "b":[1,{"c":"}"}] } `, `{"a":1,"a":2}`, `{"\u006dodel":"x","m\"":null}`,
		`[1, "two", {"3":[]}, null, true]`, `{"a":"\\"}`, `[{"role":"user","content":[{"type":"text","text":"hi"}]}]`,
		`{"Stream":1,"messages":{"Role":2},"\u017ftream":3}`, `{"top_\u212a":1,"TOP_K":2}`,
		`{"n":1,"x":{"n":2},"x":3,"stop":4,"n":5,"stop":6}`, `{"a":1,"stop":[],"St\u006fp":0,"stop":2}`,
		`{"role":"user","content":"a","name":null,"content":"b","Role":1}`, `{"tool_calls":[],"x":{"role":1},"tool_call_id":"c"}`,
		`{"a":}`, `{"a" 1}`, `[1,]`, `{"a":1}x`, `"str"`, `{`, `[`, `{"a":[}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, flagged, ok := scanObject(b, chatMembers)
		a, aok := appendElements([]json.RawMessage{}, b)
		// scanFields reads what scanObject does, without the map.
		var f messageFields
		ffl, fok := scanFields(b, messageMembers, f[:])
		mo, mfl, mok := scanObject(b, messageMembers)
		if fok != mok || (fok && ffl != mfl) {
			t.Fatalf("scanFields ok=%v flagged %q, scanObject ok=%v flagged %q, for %q", fok, ffl, mok, mfl, b)
		}
		for i, n := range messageMembers.names {
			if fok && ((f[i] == nil) != (mo[n] == nil) || !bytes.Equal(f[i], mo[n])) {
				t.Fatalf("scanFields %s = %q, scanObject %q, for %q", n, f[i], mo[n], b)
			}
		}
		if !json.Valid(b) {
			return // no panic is all that is asked; callers validate first
		}
		var want object
		werr := json.Unmarshal(b, &want)
		isObj := werr == nil && want != nil
		if ok != isObj {
			t.Fatalf("scanObject ok=%v, json.Unmarshal object=%v (err %v) for %q", ok, isObj, werr, b)
		}
		if ok {
			if len(o) != len(want) {
				t.Fatalf("scanObject %d members, json %d, for %q", len(o), len(want), b)
			}
			for k, v := range want {
				if !bytes.Equal(o[k], v) {
					t.Fatalf("member %q: scan %q, json %q", k, o[k], v)
				}
			}
			if want := flaggedKey(t, b, chatMembers); flagged != want {
				t.Fatalf("flagged %q, want %q, for %q", flagged, want, b)
			}
		}
		var wantA []json.RawMessage
		aerr := json.Unmarshal(b, &wantA)
		isArr := aerr == nil && wantA != nil
		if aok != isArr {
			t.Fatalf("appendElements ok=%v, json array=%v (err %v) for %q", aok, isArr, aerr, b)
		}
		if aok {
			if len(a) != len(wantA) {
				t.Fatalf("appendElements %d elements, json %d, for %q", len(a), len(wantA), b)
			}
			for i := range a {
				if !bytes.Equal(a[i], wantA[i]) {
					t.Fatalf("element %d: scan %q, json %q", i, a[i], wantA[i])
				}
			}
		}
	})
}

// stringLen measures what asString decodes, escapes and all, and agrees
// on what is not a string; intern gives back the bytes it was handed.
func TestStringLenMatchesAsString(t *testing.T) {
	for _, raw := range []string{
		`""`, `"user"`, ` "a b" `, `"caf\u00e9"`, `"line\nbreak"`, `"tab\tand \"quotes\""`,
		`"✓ unicode"`, `"\ud83d\ude00"`, `"\ud800"`, `"a\\b"`, `null`, `42`, `[]`, `{}`, `"unterminated`, ``,
	} {
		s, ok := asString(json.RawMessage(raw))
		n, nok := stringLen(json.RawMessage(raw))
		if ok != nok || (ok && n != len(s)) {
			t.Errorf("%s: stringLen %d,%v; asString %q,%v", raw, n, nok, s, ok)
		}
	}
	for _, w := range []string{"model", "role", "user", "not-a-known-key", ""} {
		if got := intern([]byte(w)); got != w {
			t.Errorf("intern(%q) = %q", w, got)
		}
	}
}

// FuzzStringLen: stringLen agrees with asString on every input, valid JSON
// strings with any escapes included.
func FuzzStringLen(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"\ud800x"`, `"\udc00\ud800"`,
		`"\ud83d\u0041"`, "\"caf\xc3\xa9\"", "\"\xff\"", `"\u12"`, `"a"b"`, "\"\x01\"", `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, ok := asString(raw)
		n, nok := stringLen(raw)
		if ok != nok || (ok && n != len(s)) {
			t.Fatalf("%q: stringLen %d,%v; asString %d,%v", raw, n, nok, len(s), ok)
		}
	})
}

// FuzzAsString: asString decodes a string exactly as encoding/json does
// (escapes, surrogates, bytes that are not UTF-8), and refuses the valid
// JSON values that are not strings. Its callers hand it values cut from
// validated documents only, so invalid JSON is not compared.
func FuzzAsString(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"\ud800x"`, `"\udc00\ud800"`,
		`"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, "\"caf\xc3\xa9 \xed\xa0\x80 \xef\xbf\xbd\"", "\"\xff\\n\xc3\"", `"\u12"`, `"a"b"`,
		"\"\x01\"", `"tail\"`, ` "spaced\n" `, `"\uD834\uDD1E"`, `"\u0000"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		var want string
		werr := json.Unmarshal(raw, &want)
		if t := bytes.TrimSpace(raw); t[0] != '"' {
			werr = errors.New("not a string") // encoding/json reads null into a string
		}
		got, ok := asString(raw)
		if ok != (werr == nil) || got != want {
			t.Fatalf("%q: asString %q,%v; encoding/json %q,%v", raw, got, ok, want, werr)
		}
	})
}

// flaggedKey is what scanObject should flag in the valid JSON object b:
// its top-level keys, read in order with encoding/json's tokenizer, the
// first that s calls a variant, or else the first of s's names seen twice.
func flaggedKey(t *testing.T, b []byte, s *memberSet) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // a number past float64's range is still valid JSON
	depth, expectKey := 0, false
	var keys []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
				expectKey = depth == 1 // the top-level object opened
			} else if depth--; depth == 1 {
				expectKey = true // a nested value ended
			}
			continue
		}
		if depth != 1 {
			continue
		}
		if k, ok := tok.(string); ok && expectKey {
			keys = append(keys, k)
		}
		expectKey = !expectKey
	}
	for _, k := range keys {
		if s.isVariant(k) {
			return k
		}
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if slices.Contains(s.names, k) {
			if seen[k] {
				return k
			}
			seen[k] = true
		}
	}
	return ""
}
