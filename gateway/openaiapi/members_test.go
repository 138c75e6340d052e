package openaiapi

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// Each level the edge reads refuses a case variant of a member it reads,
// and a member it reads given twice, naming it; unknown members and a body
// without the variant pass.
func TestCaseVariantsRefused(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const variant, twice = "only in case", "more than one"
	for _, tc := range []struct {
		parse func([]byte) error
		body  string
		param string
		why   string // "" when the body passes
	}{
		{chat, `{"model":"m",` + msgs + `,"max_tokens":16,"Max_Tokens":9999}`, "Max_Tokens", variant},
		{chat, `{"model":"m",` + msgs + `,"MAX_COMPLETION_TOKENS":9999}`, "MAX_COMPLETION_TOKENS", variant},
		{chat, `{"model":"m",` + msgs + `,"ſtream":true}`, "ſtream", variant},                       // long s
		{chat, `{"model":"m",` + msgs + `,"top_\u212a":5}`, "top_\u212a", variant},                  // Kelvin sign
		{chat, `{"model":"m",` + msgs + `,"\u004eessages":[]}`, "", ""},                             // folds to no name
		{chat, `{"model":"m",` + msgs + `,"\u004dessages":[{"role":"user"}]}`, "Messages", variant}, // escaped
		{chat, `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"Include_Usage":true}}`, "stream_options.Include_Usage", variant},
		{chat, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"user","content":"x","Content":"y"}]}`, "messages[1].Content", variant},
		{chat, `{"model":"m","messages":[{"role":"user","content":"x","ROLE":"system"}]}`, "messages[0].ROLE", variant},
		{chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","Text":"b"}]}]}`, "messages[0].content[0].Text", variant},
		{chat, `{"model":"m",` + msgs + `,"tools":[{"type":"function","Function":{"name":"g"},"function":{"name":"f"}}]}`, "tools[0].Function", variant},
		{chat, `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"f","Name":"g"}}]}`, "tools[0].function.Name", variant},
		{chat, `{"model":"m",` + msgs + `,"tool_choice":{"type":"function","function":{"name":"f"},"Type":"none"}}`, "tool_choice.Type", variant},
		{chat, `{"model":"m",` + msgs + `,"tool_choice":{"type":"function","function":{"name":"f","NAME":"g"}}}`, "tool_choice.function.NAME", variant},
		{chat, `{"model":"m",` + msgs + `,"max_tokens":16,"max_tokens":9999}`, "max_tokens", twice},
		{chat, `{"model":"m",` + msgs + `,"Max_Tokens":1,"max_tokens":16,"max_tokens":9999}`, "Max_Tokens", variant}, // a variant first
		{chat, `{"model":"m","messages":[{"role":"user","content":"hi","content":"unestimated"}]}`, "messages[0].content", twice},
		{chat, `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"include_usage":false,"include_usage":true}}`, "stream_options.include_usage", twice},
		{chat, `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"f"},"function":{"name":"f","description":"d"}}]}`, "tools[0].function", twice},
		{chat, `{"model":"m",` + msgs + `,"tool_choice":{"type":"function","function":{"name":"f","name":"g"}}}`, "tool_choice.function.name", twice},
		{chat, `{"model":"m",` + msgs + `,"chat_template_kwargs":{},"chat_template_kwargs":{"x":1}}`, "", ""}, // unknown: not read
		{chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"a","url":"b"}}]}]}`, "", ""},
		{completion, `{"model":"m","prompt":"p","Prompt":"q"}`, "Prompt", variant},
		{completion, `{"model":"m","prompt":"p","stream":true,"stream_options":{"include_Usage":false}}`, "stream_options.include_Usage", variant},
		{completion, `{"model":"m","prompt":"p","prompt":"q"}`, "prompt", twice},
		{embedding, `{"model":"m","input":"p","Dimensions":8}`, "Dimensions", variant},
		{embedding, `{"model":"m","input":"p","input":["q","r"]}`, "input", twice},
		{responses, `{"model":"m","input":"p","Stream":true}`, "Stream", variant},
		{responses, `{"model":"m","input":"p","stream":false,"stream":true}`, "stream", twice},
	} {
		err := tc.parse([]byte(tc.body))
		if tc.why == "" {
			if err != nil {
				t.Errorf("%s: %v, want accepted", tc.body, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted, want %s refused", tc.body, tc.param)
			continue
		}
		e := err.(*Error)
		if e.Status != 400 || paramOf(e) != tc.param || !strings.Contains(e.Message, tc.why) {
			t.Errorf("%s: %d %q param %s, want 400 naming %s, %q", tc.body, e.Status, e.Message, paramOf(e), tc.param, tc.why)
		}
	}
	// The error names the first variant in the body.
	body := []byte(`{"model":"m",` + msgs + `,"Stream":true,"N":2,"Tools":[],"Stop":"x","Seed":1}`)
	if err := chat(body); err == nil || paramOf(err.(*Error)) != "Stream" {
		t.Fatalf("err = %v, want param Stream", err)
	}
}

func chat(b []byte) error       { _, err := ParseChat(b); return err }
func completion(b []byte) error { _, err := ParseCompletion(b); return err }
func embedding(b []byte) error  { _, err := ParseEmbedding(b); return err }
func responses(b []byte) error  { _, err := ParseResponses(b); return err }

func paramOf(e *Error) string {
	if e.Param == nil {
		return "<nil>"
	}
	return *e.Param
}

// variantOf agrees with encoding/json itself: a key is refused exactly when
// json.Unmarshal would store its value in a struct field named by one of
// the set's names without the key being that name. Keys are generated from
// the names by changing case, swapping in the runes that fold to ASCII
// letters (and some that do not), and editing them.
func TestVariantOfMatchesEncodingJSON(t *testing.T) {
	sets := []*memberSet{chatMembers, completionMembers, embeddingMembers, responsesMembers,
		streamOptionMembers, messageMembers, contentPartMembers, toolMembers,
		toolFunctionMembers, toolChoiceMembers, choiceFunctionMember}
	rng := rand.New(rand.NewPCG(18, 56))
	odd := []string{"\u212a", "\u017f", "\u0131", "\u0130", "\u00df", "é", "_", "-", ""}
	checked := 0
	for _, s := range sets {
		typ := structOf(s.names)
		for range 600 {
			k := []rune(s.names[rng.IntN(len(s.names))])
			for i := range k {
				switch rng.IntN(6) {
				case 0, 1:
					k[i] = []rune(strings.ToUpper(string(k[i])))[0]
				case 2:
					switch k[i] {
					case 'k':
						k[i] = '\u212a'
					case 's':
						k[i] = '\u017f'
					case 'i':
						k[i] = []rune("\u0131\u0130")[rng.IntN(2)]
					}
				}
			}
			key := string(k)
			if rng.IntN(8) == 0 { // an edit: no longer any name's variant, mostly
				i := rng.IntN(len(key) + 1)
				key = key[:i] + odd[rng.IntN(len(odd))] + key[i:]
			}
			if !utf8.ValidString(key) {
				continue
			}
			checked++
			v := reflect.New(typ)
			doc, _ := json.Marshal(map[string]int{key: 1})
			if err := json.Unmarshal(doc, v.Interface()); err != nil {
				t.Fatal(err)
			}
			want := ""
			for i, n := range s.names {
				if v.Elem().Field(i).Int() == 1 && key != n {
					want = n
				}
			}
			if got := s.variantOf(key); got != want {
				t.Errorf("variantOf(%q) = %q, encoding/json reads it as %q", key, got, want)
			}
			if got := s.isVariant(key); got != (want != "") {
				t.Errorf("isVariant(%q) = %v (mayFold's shortcut), encoding/json reads it as %q", key, got, want)
			}
		}
	}
	if checked < 5000 {
		t.Fatalf("only %d keys checked", checked)
	}
}

// structOf is a struct type with an int field per name, tagged with it.
func structOf(names []string) reflect.Type {
	fields := make([]reflect.StructField, len(names))
	for i, n := range names {
		fields[i] = reflect.StructField{
			Name: fmt.Sprintf("F%d", i),
			Type: reflect.TypeFor[int](),
			Tag:  reflect.StructTag(`json:"` + n + `"`),
		}
	}
	return reflect.StructOf(fields)
}

// deepNames are names the normalizers read below the levels that are
// checked, by exact name into typed fields: a variant there is dropped,
// never read (members.go).
var deepNames = []string{"json_schema", "schema", "url", "detail", "id", "arguments"}

// Every member name the package's validators and normalizers look up in a
// request's objects is in a member set (or is one of deepNames), so that a
// name read later cannot miss its variant check. The names are taken from
// the sources that read requests: string literals passed to a fields'
// get, indexing a map, or listed in a range over an array or slice
// literal.
func TestMemberSetsCoverReads(t *testing.T) {
	known := map[string]bool{}
	for _, s := range []*memberSet{chatMembers, completionMembers, embeddingMembers, responsesMembers,
		streamOptionMembers, messageMembers, contentPartMembers, toolMembers,
		toolFunctionMembers, toolChoiceMembers, choiceFunctionMember} {
		for _, n := range s.names {
			known[n] = true
		}
	}
	for _, n := range deepNames {
		known[n] = true
	}
	files := []string{"request.go", "request_other.go", "validate.go", "normalize.go"}
	fset := token.NewFileSet()
	var read []string
	lit := func(e ast.Expr) {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			if s, err := strconv.Unquote(b.Value); err == nil {
				read = append(read, s)
			}
		}
	}
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "get" && len(n.Args) == 1 {
					lit(n.Args[0])
				}
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "optBoolPtr" && len(n.Args) > 1 {
					lit(n.Args[1])
				}
			case *ast.IndexExpr:
				lit(n.Index)
			case *ast.RangeStmt:
				if c, ok := n.X.(*ast.CompositeLit); ok {
					for _, el := range c.Elts {
						lit(el)
					}
				}
			}
			return true
		})
	}
	if len(read) < 40 {
		t.Fatalf("found %d lookups; the search no longer sees the sources", len(read))
	}
	slices.Sort(read)
	for _, n := range slices.Compact(read) {
		if !known[n] {
			t.Errorf("%q is looked up but in no member set (members.go)", n)
		}
	}
}

// The encoding/json fallback of objectOf and decodeObject, which has no
// body order to go by, names the least variant whatever the map's
// iteration order, or else the first repeated name.
func TestFlagUnscanned(t *testing.T) {
	obj := object{"Stream": nil, "N": nil, "Tools": nil, "stop": nil, "Seed": nil, "unknown": nil}
	for range 20 {
		if got := chatMembers.flagUnscanned(obj, []byte(`{}`)); got != "N" {
			t.Fatalf("flagUnscanned = %q, want N", got)
		}
	}
	body := []byte(` {"x":1,"x":2,"stop":[1,{"stop":2}],"n":1,"stop":"s","n":2} `)
	if got := chatMembers.flagUnscanned(object{"x": nil, "stop": nil, "n": nil}, body); got != "stop" {
		t.Fatalf("flagUnscanned = %q, want stop", got)
	}
	if got := (*memberSet)(nil).flagUnscanned(obj, body); got != "" {
		t.Fatalf("nil set: %q", got)
	}
}

// decodeTopLevel asks modelKeyError only when the scan flagged a member,
// which covers every body it refuses only if each top-level set reads
// "model".
func TestTopLevelSetsReadModel(t *testing.T) {
	for _, s := range []*memberSet{chatMembers, completionMembers, embeddingMembers, responsesMembers} {
		if !s.has("model") {
			t.Errorf("%v lacks model", s.names)
		}
	}
}
