package openaiapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// validSeeds are edge cases of the grammar, each of which valid must judge
// as encoding/json.Valid does.
var validSeeds = []string{
	``, ` `, `{}`, `[]`, ` {} `, `{`, `}`, `[`, `]`, `[}`, `{]`, `{,}`, `[,]`, `[1,]`, `{"a":1,}`,
	`{"a"}`, `{"a":}`, `{a:1}`, `{"a" : 1 , "b" : [ ] }`, `{"a":1 "b":2}`, `[1 2]`, `[[[]]]`, `[[[]]`,
	`0`, `-0`, `-`, `01`, `1.`, `.1`, `1.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.0e10`, `1.e1`, `+1`, `0x1`, `1.5.5`,
	`true`, `false`, `null`, `tru`, `nul`, `truex`, `True`, `nullnull`, `[true,false,null]`,
	`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u00"`, `"\x"`, `"\`, `"\\\"`,
	"\"\x00\"", "\"\x1f\"", "\"\x7f\"", "\"\xff\xfe\"", "\"é\"", "\"\t\"", "\"a\nb\"", `"a`, `"a"b"`,
	"{\"a\":1}\n", "\t[1]\r\n", `{"a":{"b":{"c":[1,{"d":null}]}}}`, `{"":""}`, `[""]`,
	`"abcdefgh\"ijklmnop"`, `"abcdefghijklmnopqrstuvwxyz0123456789"`, `"abcdefgh\\"`, `"abcdefghijklmno\\\\"`,
	`{"model":"x","messages":[{"role":"user","content":"hi"}]}`, `{"a":1}{"b":2}`, `[1]]`, `1 2`,
}

// valid judges every byte string as encoding/json.Valid does.
func FuzzValid(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Add(bigChat()[:4096])
	f.Add(longChat())
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := valid(b), json.Valid(b); got != want {
			t.Fatalf("valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// Random documents, and every single-byte mutation of each (the kind of
// near-miss a fuzzer takes long to reach), judged as encoding/json does;
// and nesting at and past encoding/json's depth bound.
func TestValidMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	alphabet := []byte(`{}[]":,.-+eE0123456789 tfnrulsa\/bu` + "\x00\x1f\x7f\xc3\xa9\xff\n\t")
	for n := range 3000 {
		doc := randomJSON(rng, 0)
		if !json.Valid(doc) {
			t.Fatalf("generator wrote invalid JSON %q", doc)
		}
		if !valid(doc) {
			t.Fatalf("valid(%q) = false", doc)
		}
		if n%10 != 0 {
			continue
		}
		for i := range doc {
			m := bytes.Clone(doc)
			m[i] = alphabet[rng.IntN(len(alphabet))]
			if got, want := valid(m), json.Valid(m); got != want {
				t.Fatalf("valid(%q) = %v, encoding/json says %v", m, got, want)
			}
			if got, want := valid(m[:i]), json.Valid(m[:i]); got != want {
				t.Fatalf("valid(%q) = %v, encoding/json says %v", m[:i], got, want)
			}
		}
	}
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			doc := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
			if got, want := valid(doc), json.Valid(doc); got != want {
				t.Fatalf("depth %d of %s: valid %v, encoding/json %v", depth, open, got, want)
			}
		}
	}
}

// randomJSON writes a random valid document, strings with every kind of
// escape and runs long enough for the eight-byte scan.
func randomJSON(rng *rand.Rand, depth int) []byte {
	ws := func() string { return []string{"", "", " ", "\n", "\t ", "\r\n"}[rng.IntN(6)] }
	kind := rng.IntN(8)
	if depth > 4 {
		kind = rng.IntN(5)
	}
	switch kind {
	case 0:
		return []byte([]string{"true", "false", "null"}[rng.IntN(3)])
	case 1:
		return []byte([]string{"0", "-0", "12", "-3.25", "1e9", "6.02E+23", "1.5e-7", "9007199254740993"}[rng.IntN(8)])
	case 2, 3, 4:
		return randomString(rng)
	case 5, 6:
		var b strings.Builder
		b.WriteString("{" + ws())
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.Write(randomString(rng))
			b.WriteString(ws() + ":" + ws())
			b.Write(randomJSON(rng, depth+1))
			b.WriteString(ws())
		}
		b.WriteString("}")
		return []byte(b.String())
	default:
		var b strings.Builder
		b.WriteString("[" + ws())
		for i := range rng.IntN(5) {
			if i > 0 {
				b.WriteString(ws() + "," + ws())
			}
			b.Write(randomJSON(rng, depth+1))
		}
		b.WriteString(ws() + "]")
		return []byte(b.String())
	}
}

// randomString writes a random string literal: escapes of every kind,
// multi-byte and invalid UTF-8, and plain runs.
func randomString(rng *rand.Rand) []byte {
	var b strings.Builder
	b.WriteByte('"')
	for range rng.IntN(40) {
		switch rng.IntN(10) {
		case 0:
			b.WriteString([]string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u00e9`, `\uD83D\uDE00`}[rng.IntN(10)])
		case 1:
			b.WriteString([]string{"é", "日本", "\xff", "\x7f", "😀"}[rng.IntN(5)])
		default:
			b.WriteString(strings.Repeat("abcdefgh ", rng.IntN(3)) + "x")
		}
	}
	b.WriteByte('"')
	return []byte(b.String())
}

// The eight-byte tests agree with the byte-at-a-time definitions on every
// byte value in every lane.
func TestRunsMatchBytewise(t *testing.T) {
	for c := range 256 {
		for lane := range 8 {
			b := []byte("abcdefghABCDEFGH")
			b[lane] = byte(c)
			wantS, wantA := len(b), len(b)
			if c == '"' || c == '\\' || c < 0x20 {
				wantS = lane
			}
			if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
				wantA = lane
			}
			if got := stringRun(b); got != wantS {
				t.Fatalf("stringRun with %#x at %d: %d, want %d", c, lane, got, wantS)
			}
			if got := asciiRun(b); got != wantA {
				t.Fatalf("asciiRun with %#x at %d: %d, want %d", c, lane, got, wantA)
			}
		}
	}
}

func BenchmarkValidLong(b *testing.B) {
	body := longChat()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if !valid(body) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkEncodingJSONValidLong(b *testing.B) {
	body := longChat()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if !json.Valid(body) {
			b.Fatal("invalid")
		}
	}
}
