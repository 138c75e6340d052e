package jsonenc

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// withoutHTMLEscapes undoes json.Marshal's HTML escaping (\u003c, \u003e,
// \u0026) and nothing else: an escaped backslash before "u003c" is text.
func withoutHTMLEscapes(b []byte) string {
	var out strings.Builder
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			out.WriteByte(b[i])
			continue
		}
		if i+5 < len(b) && b[i+1] == 'u' {
			switch string(b[i+2 : i+6]) {
			case "003c":
				out.WriteByte('<')
				i += 5
				continue
			case "003e":
				out.WriteByte('>')
				i += 5
				continue
			case "0026":
				out.WriteByte('&')
				i += 5
				continue
			}
		}
		out.Write(b[i : i+2]) // any other escape, copied whole
		i++
	}
	return out.String()
}

// stdlibString is json.Marshal's encoding of s with HTML left as it is.
func stdlibString(t testing.TB, s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return withoutHTMLEscapes(b)
}

// Every byte, alone and between text, and the runes at the edges of each
// UTF-8 length and of the escaped ranges, encode byte for byte as
// encoding/json's json.Marshal (HTML aside), through AppendString and
// Marshal alike.
func TestStringsMatchEncodingJSON(t *testing.T) {
	var cases []string
	for b := 0; b < 256; b++ {
		cases = append(cases, string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"\\u003c", string([]byte{byte(b), byte(b)}))
	}
	for _, r := range []rune{0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfffd, 0xffff, 0x10000, 0x10ffff, 0x2027, 0x2028, 0x2029, 0x202a} {
		cases = append(cases, string(r), "x"+string(r)+"y")
		enc := []byte(string(r))
		cases = append(cases, string(enc[:len(enc)-1])+"z") // cut short
	}
	for _, s := range cases {
		want := stdlibString(t, s)
		if got := string(AppendString(nil, s)); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
		if got, err := Marshal(s); err != nil || string(got) != want {
			t.Errorf("Marshal(%q) = %s, %v, want %s", s, got, err, want)
		}
	}
}

// FuzzStringsMatchEncodingJSON holds AppendString to json.Marshal itself
// (HTML aside), not only to Marshal, so a change to Marshal's encoder set-up
// cannot carry AppendString along with it.
func FuzzStringsMatchEncodingJSON(f *testing.F) {
	for _, s := range appendStringCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := stdlibString(t, s)
		if got := string(AppendString(nil, s)); got != want {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		var back string
		if err := json.Unmarshal([]byte(want), &back); err != nil {
			t.Fatalf("%s does not decode: %v", want, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("%q came back as %q", s, back)
		}
	})
}
