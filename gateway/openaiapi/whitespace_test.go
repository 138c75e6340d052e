package openaiapi

import (
	"encoding/json"
	"errors"
	"testing"
)

// Only JSON's four whitespace bytes may surround a body: anything else
// (a form feed, a vertical tab, a no-break space, NEL) makes it a
// document no JSON parser reads, which the tunnel would otherwise forward
// byte for byte, or fail to rewrite after taking a lease.
func TestParseRefusesNonJSONWhitespaceAroundBody(t *testing.T) {
	parsers := map[string]struct {
		body  string
		parse func([]byte) error
	}{
		"chat": {`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			func(b []byte) error { _, err := ParseChat(b); return err }},
		"completion": {`{"model":"m","prompt":"hi"}`,
			func(b []byte) error { _, err := ParseCompletion(b); return err }},
		"embedding": {`{"model":"m","input":"hi"}`,
			func(b []byte) error { _, err := ParseEmbedding(b); return err }},
		"responses": {`{"model":"m","input":"hi"}`,
			func(b []byte) error { _, err := ParseResponses(b); return err }},
	}
	for name, p := range parsers {
		for _, around := range [][2]string{
			{"\f", ""}, {"", "\v"}, {"\u00a0", ""}, {"", "\u0085"}, {"\u2028", "\u3000"},
		} {
			body := []byte(around[0] + p.body + around[1])
			if json.Valid(body) {
				t.Fatalf("%s: %q is valid JSON", name, body)
			}
			err := p.parse(body)
			if !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("%s: %q: err = %v, want invalid_request", name, body, err)
			}
		}
		// JSON's own whitespace stays accepted, and the body rewritable.
		body := []byte(" \t\r\n" + p.body + "\n\r\t ")
		if err := p.parse(body); err != nil {
			t.Errorf("%s: %q: %v", name, body, err)
		}
		out, err := RewriteValidModel(body, "t")
		if err != nil || !json.Valid(out) {
			t.Errorf("%s: rewrite of %q: %q, %v", name, body, out, err)
		}
	}
}
