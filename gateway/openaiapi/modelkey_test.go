package openaiapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// parsers are the endpoint parsers, each with the members a body needs
// besides its model to be accepted.
var parsers = []struct {
	name  string
	rest  string
	parse func([]byte) error
}{
	{"chat", okMsgs, func(b []byte) error { _, err := ParseChat(b); return err }},
	{"completions", `"prompt":"hi"`, func(b []byte) error { _, err := ParseCompletion(b); return err }},
	{"embeddings", `"input":"hi"`, func(b []byte) error { _, err := ParseEmbedding(b); return err }},
	{"responses", `"input":"hi"`, func(b []byte) error { _, err := ParseResponses(b); return err }},
}

func TestParseRefusesModelKeyVariants(t *testing.T) {
	cases := []struct {
		name, key, param string
	}{
		{"upper", `"MODEL"`, "MODEL"},
		{"title", `"Model"`, "Model"},
		{"mixed", `"mOdEl"`, "mOdEl"},
		{"escaped lower e", `"mod\u0065l"`, "model"},
		{"escaped upper E", `"MOD\u0045L"`, "MODEL"},
		{"escaped all", `"\u004d\u006f\u0064\u0065\u004c"`, "ModeL"},
	}
	for _, p := range parsers {
		for _, tc := range cases {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				for _, body := range []string{
					`{"model":"m",` + p.rest + `,` + tc.key + `:"smuggled"}`,
					`{` + tc.key + `:"smuggled","model":"m",` + p.rest + `}`,
					`{` + tc.key + `:"m",` + p.rest + `}`,
				} {
					err := p.parse([]byte(body))
					if tc.param == "model" {
						// An escaped exact spelling is the same key: a
						// duplicate of (or the only) "model".
						if strings.HasPrefix(body, `{"model"`) || strings.Contains(body, `,"model"`) {
							wantErr(t, err, "model", "more than one 'model'")
						} else if err != nil {
							t.Fatalf("%s: sole escaped model refused: %v", body, err)
						}
						continue
					}
					wantErr(t, err, tc.param, "differs from 'model'")
				}
			})
		}
	}
}

func TestParseRefusesDuplicateModel(t *testing.T) {
	for _, p := range parsers {
		t.Run(p.name, func(t *testing.T) {
			for _, body := range []string{
				`{"model":"m",` + p.rest + `,"model":"smuggled"}`,
				`{"model":"m","model":"m",` + p.rest + `}`,
				`{"model":"m",` + p.rest + `,"model":null}`,
			} {
				wantErr(t, p.parse([]byte(body)), "model", "more than one 'model'")
			}
			// A nested "MODEL" or "model" is not the request's model.
			if err := p.parse([]byte(`{"model":"m",` + p.rest + `,"metadata":{"MODEL":"x","model":"y"}}`)); err != nil {
				t.Fatalf("nested keys refused: %v", err)
			}
		})
	}
}

// TestModelKeyFoldingMatchesEncodingJSON checks that every key Go's
// encoding/json would match to a field named "model" is one the parsers
// refuse, including Unicode folds of its letters (none exist today for
// m, o, d, e, l, but the check must not depend on that).
func TestModelKeyFoldingMatchesEncodingJSON(t *testing.T) {
	var variants []string
	var build func(prefix string, rest string)
	build = func(prefix, rest string) {
		if rest == "" {
			variants = append(variants, prefix)
			return
		}
		r, size := utf8.DecodeRuneInString(rest)
		for f := r; ; {
			build(prefix+string(f), rest[size:])
			if f = unicode.SimpleFold(f); f == r {
				break
			}
		}
	}
	build("", "model")
	if len(variants) < 32 {
		t.Fatalf("only %d variants", len(variants))
	}
	for _, v := range variants {
		key, _ := json.Marshal(v)
		body := `{"messages":[{"role":"user","content":"hi"}],` + string(key) + `:"smuggled","model":"m"}`
		// What encoding/json would read as the model.
		var s struct {
			Model string `json:"model"`
		}
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		_, err := ParseChat([]byte(body))
		if v == "model" {
			wantErr(t, err, "model", "more than one")
			continue
		}
		wantErr(t, err, v, "differs from 'model'")
	}
	// The Kelvin sign and long s fold to k and s, so a key such as
	// "\u212aey" is not a model key; spot-check that folding is not
	// overly broad.
	if _, err := ParseChat([]byte(`{"model":"m",` + okMsgs + `,"modelx":1,"mode":2,"ſ":3,"K":4}`)); err != nil {
		t.Fatalf("unrelated keys refused: %v", err)
	}
}

func TestRewriteModelCaseVariants(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"model":"a","MODEL":"b"}`, `{"model":"t","MODEL":"t"}`},
		{`{"MODEL":"b","x":1}`, `{"model":"t","MODEL":"t","x":1}`},
		{`{"mod\u0065l":"a","Model":"b"}`, `{"mod\u0065l":"t","Model":"t"}`},
	}
	for _, tc := range cases {
		got, err := RewriteModel([]byte(tc.in), "t")
		if err != nil || string(got) != tc.want {
			t.Fatalf("RewriteModel(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
		in, err := withoutModel([]byte(tc.in))
		if err != nil || strings.Contains(strings.ToLower(string(in)), "model") {
			t.Fatalf("withoutModel(%s) = %s, %v", tc.in, in, err)
		}
	}
}

// FuzzParsedBodyHasOneModelKey: whatever a parser accepts, the rewritten
// body carries exactly one top-level key that any upstream parser could read
// as the model, and its value is the target.
func FuzzParsedBodyHasOneModelKey(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"mod\u0065l":"m","prompt":"x","input":"y","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","MODEL":"x","input":"y"}`))
	f.Add([]byte(`{"model":"m","model":"x","input":"y"}`))
	f.Add([]byte(`{"\u004dodel":"m","input":"y"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range parsers {
			if p.parse(body) != nil {
				continue
			}
			out, err := RewriteModel(body, "target")
			if err != nil {
				t.Fatalf("%s accepted %q but RewriteModel failed: %v", p.name, body, err)
			}
			_, members, err := scanTopLevel(out)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, m := range members {
				k, ok := decodeKey(out[m.keyStart:m.keyEnd])
				if !ok {
					t.Fatalf("undecodable key in %q", out)
				}
				if strings.EqualFold(k, "model") {
					n++
					var v string
					if err := json.Unmarshal(out[m.valStart:m.valEnd], &v); err != nil || v != "target" {
						t.Fatalf("model value %q in %q", out[m.valStart:m.valEnd], out)
					}
				}
			}
			if n != 1 {
				t.Fatalf("%s: %d model keys in %q", p.name, n, out)
			}
		}
	})
}

func TestModelKeyErrorIsInvalidRequest(t *testing.T) {
	err := func() error { _, err := ParseEmbedding([]byte(`{"model":"m","input":"x","MODEL":"y"}`)); return err }()
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("err = %v", err)
	}
}
