package anthropicapi

import "testing"

// Patterns whose reading depends on the regex dialect, or that Rust's
// regex parser (regex-syntax: octal off, as by default) refuses as a
// backreference, are not sent as strict: a refused pattern costs the
// whole request (400), a pattern not held to costs nothing. Patterns
// every dialect reads alike keep strict.
func TestStrictPatternDialects35r(t *testing.T) {
	for _, c := range []struct {
		re   string
		want bool
	}{
		// ECMA-262 (JSON Schema's dialect): [^] is any character and []
		// an empty class, so what follows is outside any class; Python and
		// Rust read a ']' there as a member, the class going on.
		{`^[^]*$`, false},
		{`^[^]*(?=x)`, false},
		{`^[]a]$`, false},
		{`^[^]a]+$`, false},
		// regex-syntax refuses \0 to \9 anywhere ("backreferences are not
		// supported"), in a class too, and \k is no escape it knows.
		{`^\0$`, false},
		{`^[\1]$`, false},
		{`^[a\9]$`, false},
		{`^a\k<x>$`, false},
		{`^[\k]$`, false},
		// Escapes and classes every dialect reads alike.
		{`^\\1$`, true},        // an escaped backslash, then a 1
		{`^[a\]b]+$`, true},    // an escaped ']' does not end the class
		{`^[\]](?=x)$`, false}, // ... and the class's ']' does
		{`^[a-z\d]{2}\.\d+$`, true},
		{`^[(?=][(?<!]$`, true},  // classes, one after another
		{`^(?<name>a)+$`, true},  // a named group
		{`^(?:a|b)(?i)c$`, true}, // groups that are no lookaround
		{`^\(?<=x\)$`, true},     // an escaped parenthesis
		{`[`, true},              // nothing after the class to misread
		{`\`, true},
	} {
		if got := strictPattern(c.re); got != c.want {
			t.Errorf("strictPattern(%q) = %v, want %v", c.re, got, c.want)
		}
	}
}

// Values of the schema's type, numbers as JSON Schema counts them (an
// integer is a number with no fraction, 1.0 and 1e2 included), keep
// strict; a value of another type does not.
func TestStrictValueTypes35r(t *testing.T) {
	for _, c := range []struct {
		sub  string
		want bool
	}{
		{`{"type":"integer","enum":[1e2,-0,1.0,12345678901234567890123]}`, true},
		{`{"type":["integer","null"],"const":null}`, true},
		{`{"type":["number","string"],"enum":[1.5,"a"]}`, true},
		{`{"type":"integer","const":1.5}`, false},
		{`{"type":"integer","const":-0.5}`, false},
		{`{"type":"number","enum":[true]}`, false},
		{`{"type":"boolean","enum":[1]}`, false},
		{`{"type":"null","enum":[false]}`, false},
		{`{"type":["string","null"],"enum":["a",null,2]}`, false},
	} {
		if got := strictSchema([]byte(strict34rObject(c.sub))); got != c.want {
			t.Errorf("%s: strict %v, want %v", c.sub, got, c.want)
		}
	}
}
