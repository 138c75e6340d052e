package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The scanning normalizer is held to the encoding/json one it replaced
// (normalize_model_test.go) on every body the matching Parse* accepts,
// except where they differ on purpose: a key that encoding/json would
// match by case folding or that appears twice in one object (see
// keysAmbiguous), and seeds, which are now exact (checked apart).

// modelFields are the JSON names of every struct field the model decodes
// into.
var modelFields = []string{
	"messages", "role", "content", "name", "tool_call_id", "tool_calls", "id",
	"function", "arguments", "tools", "type", "description", "parameters",
	"strict", "tool_choice", "parallel_tool_calls", "response_format",
	"json_schema", "schema", "stream_options", "include_usage", "stream",
	"temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens",
	"stop", "seed", "presence_penalty", "frequency_penalty", "text",
	"image_url", "url", "detail", "prompt", "suffix", "input", "dimensions",
	"refusal", "reasoning", "reasoning_content",
}

// jsonFold is encoding/json's key folding (appendFoldedName): two keys
// match a field alike when their folds are equal.
func jsonFold(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			continue
		}
		b.WriteRune(unicode.ToUpper(unicode.ToLower(r)))
	}
	return b.String()
}

var modelFolds = func() map[string]string {
	m := map[string]string{}
	for _, f := range modelFields {
		m[jsonFold(f)] = f
	}
	return m
}()

// keysAmbiguous reports whether some object of the (valid) document has
// two keys of one fold, or a key that folds to a model field's name
// without being it: the bodies on which encoding/json reads other members
// than validation does.
func keysAmbiguous(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object bool
		key    bool // the next string token is a key
		seen   map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return true // not for this comparison
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if k, ok := tok.(string); ok {
				fk := jsonFold(k)
				if top.seen[fk] {
					return true
				}
				top.seen[fk] = true
				if f, ok := modelFolds[fk]; ok && f != k {
					return true
				}
				top.key = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			if top != nil && top.object {
				top.key = true
			}
			stack = append(stack, &frame{object: true, key: true, seen: map[string]bool{}})
			continue
		case json.Delim('['):
			if top != nil && top.object {
				top.key = true
			}
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.object {
			top.key = true // a scalar value ended; a key comes next
		}
	}
}

// topSeed is the body's top-level seed as written.
func topSeed(body []byte) (json.Number, bool) {
	var doc struct {
		Seed json.Number `json:"seed"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&doc) != nil || doc.Seed == "" {
		return "", false
	}
	return doc.Seed, true
}

// exactSeed is the top-level seed as the validation reads it.
func exactSeed(body []byte) (int64, bool) {
	seed, ok := topSeed(body)
	if !ok {
		return 0, false
	}
	if n, err := strconv.ParseInt(string(seed), 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(string(seed), 64)
	if err != nil {
		return 0, false
	}
	return int64(f), true
}

// seedPastInt64 reports whether the top-level seed is a number no int64
// holds, which a float64 rounds into 2^63 or below -2^63.
func seedPastInt64(body []byte) bool {
	seed, ok := topSeed(body)
	if !ok {
		return false
	}
	if _, err := strconv.ParseInt(string(seed), 10, 64); err == nil {
		return false
	}
	f, err := strconv.ParseFloat(string(seed), 64)
	return err == nil && (f >= 0x1p63 || f < -0x1p63)
}

// matchModel compares the normalizer of kind (0 chat, 1 completion, 2
// embedding) with its model on body, when the kind's Parse* accepts it.
func matchModel(t *testing.T, kind int, body []byte) {
	t.Helper()
	var (
		in, want *iop.RunInput
		err      error
		werr     error
	)
	// in is the parsed request's RunInput, which must be NormalizeX of
	// the body too.
	var again *iop.RunInput
	var aerr error
	switch kind {
	case 0:
		req, perr := ParseChat(body)
		if perr != nil {
			return
		}
		in, err = req.RunInput()
		again, aerr = NormalizeChat(body)
		var e *Error
		want, e = modelNormalizeChat(body)
		if e != nil {
			werr = e
		}
	case 1:
		req, perr := ParseCompletion(body)
		if perr != nil {
			return
		}
		in, err = req.RunInput()
		again, aerr = NormalizeCompletion(body)
		want, werr = modelNormalizeCompletion(body)
	default:
		req, perr := ParseEmbedding(body)
		if perr != nil {
			return
		}
		in, err = req.RunInput()
		again, aerr = NormalizeEmbedding(body)
		want, werr = modelNormalizeEmbedding(body)
	}
	if (err == nil) != (aerr == nil) || !proto.Equal(in, again) {
		t.Fatalf("%s: RunInput %v, %v; Normalize %v, %v", body, in, err, again, aerr)
	}
	if err != nil {
		if e, ok := err.(*Error); !ok || e.Status != 400 {
			t.Fatalf("%s: err = %v, want a 400 *Error", body, err)
		}
	}
	if keysAmbiguous(body) {
		return
	}
	var e *Error
	if errors.As(err, &e) && e.Param != nil && *e.Param == "seed" && werr == nil && seedPastInt64(body) {
		return // the model took 2^63 for an int64 (and read it as -2^63)
	}
	if (err == nil) != (werr == nil) {
		t.Fatalf("%s:\nnormalize err %v\n    model err %v", body, err, werr)
	}
	if err != nil {
		return
	}
	if ws := want.GetSampling(); ws != nil && ws.Seed != nil {
		seed, ok := exactSeed(body)
		if !ok || in.GetSampling().GetSeed() != seed {
			t.Fatalf("%s: seed %d, validation reads %d (%v)", body, in.GetSampling().GetSeed(), seed, ok)
		}
		want.Sampling.Seed = in.Sampling.Seed
	}
	if !proto.Equal(in, want) {
		t.Fatalf("%s:\nnormalize %s\n    model %s", body, protojson.Format(in), protojson.Format(want))
	}
}

// FuzzNormalizeMatchesModel: the first byte picks the endpoint.
func FuzzNormalizeMatchesModel(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 5))
	for kind := range 3 {
		for range 8 {
			f.Add(append([]byte{byte(kind)}, randomRunBody(rng, kind)...))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		matchModel(t, int(in[0])%3, in[1:])
	})
}

// TestNormalizeMatchesModel runs generated bodies of every endpoint, with
// members of every type in every place, in each go test.
func TestNormalizeMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	const perKind = 4000
	accepted := [3]int{}
	// Chat bodies accepted with tools and parallel_tool_calls (the seed
	// fixes every count: 83 of 417 today).
	parallelWithTools := 0
	for n := range 3 * perKind {
		kind := n % 3
		body := randomRunBody(rng, kind)
		if !json.Valid(body) {
			t.Fatalf("generator wrote invalid JSON %s", body)
		}
		matchModel(t, kind, body)
		switch kind {
		case 0:
			if r, err := ParseChat(body); err == nil {
				accepted[kind]++
				if r.HasTools && strings.Contains(string(body), `"parallel_tool_calls"`) {
					parallelWithTools++
				}
			}
		case 1:
			if _, err := ParseCompletion(body); err == nil {
				accepted[kind]++
			}
		default:
			if _, err := ParseEmbedding(body); err == nil {
				accepted[kind]++
			}
		}
	}
	// A generator whose bodies validation refuses would compare nothing.
	for kind, n := range accepted {
		if n < perKind/10 {
			t.Errorf("only %d of %d generated bodies of kind %d were accepted", n, perKind, kind)
		}
	}
	if parallelWithTools < perKind/200 {
		t.Errorf("only %d accepted chat bodies offer tools with parallel_tool_calls", parallelWithTools)
	}
}

// randomRunBody writes a body for kind (0 chat, 1 completion, 2
// embedding): mostly well-formed, with members of other types, nulls,
// unknown members, escapes and large numbers mixed in.
func randomRunBody(rng *rand.Rand, kind int) []byte {
	g := &bodyGen{rng: rng}
	members := []string{`"model":"m"`}
	switch kind {
	case 0:
		members = append(members, `"messages":`+g.messages())
		n := len(members)
		members = g.maybe(members, "tools", g.tools)
		members = g.maybe(members, "tool_choice", g.toolChoice)
		// parallel_tool_calls without tools is refused: now and then only,
		// or validation would refuse most bodies.
		if len(members) > n && strings.HasPrefix(members[n], `"tools"`) || g.rng.IntN(16) == 0 {
			members = g.maybe(members, "parallel_tool_calls", g.boolish)
		}
		members = g.maybe(members, "response_format", g.responseFormat)
		members = g.maybe(members, "stream_options", func() string { return `{"include_usage":` + g.boolish() + `}` })
		members = g.maybe(members, "max_completion_tokens", g.intish)
	case 1:
		members = append(members, `"prompt":`+g.pick(g.str, func() string { return "[" + g.str() + "]" },
			func() string { return "[" + g.str() + "," + g.str() + "]" }, func() string { return "[1,2]" }, g.any))
		members = g.maybe(members, "suffix", g.stringish)
		members = g.maybe(members, "echo", g.boolish)
	default:
		members = append(members, `"input":`+g.pick(g.str, func() string { return "[" + g.str() + "," + g.str() + "]" },
			func() string { return "[[1,2]]" }, g.any))
		members = g.maybe(members, "dimensions", g.intish)
		members = g.maybe(members, "encoding_format", func() string { return g.pick(func() string { return `"float"` }, g.str) })
	}
	members = g.maybe(members, "stream", g.boolish)
	for _, k := range []string{"temperature", "top_p", "presence_penalty", "frequency_penalty"} {
		members = g.maybe(members, k, g.number)
	}
	members = g.maybe(members, "top_k", func() string { return g.loose(g.intish) })
	members = g.maybe(members, "max_tokens", g.intish)
	members = g.maybe(members, "seed", g.seed)
	members = g.maybe(members, "stop", func() string {
		return g.pick(g.str, func() string { return "[" + g.str() + "," + g.str() + "]" }, g.any)
	})
	members = g.maybe(members, "user", g.stringish)
	members = g.maybe(members, "logprobs", g.boolish)
	members = g.maybe(members, "chat_template_kwargs", func() string { return `{"enable_thinking":false,"x":"<&>"}` })
	if g.rng.IntN(10) == 0 {
		members = append(members, `"Temperature":`+g.number()) // folds to a field: not compared
	}
	rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return []byte("{" + strings.Join(members, ",") + "}")
}

type bodyGen struct{ rng *rand.Rand }

func (g *bodyGen) pick(fs ...func() string) string { return fs[g.rng.IntN(len(fs))]() }

// maybe adds key with a value from f to members half of the time.
func (g *bodyGen) maybe(members []string, key string, f func() string) []string {
	if g.rng.IntN(2) == 0 {
		return members
	}
	return append(members, strconv.Quote(key)+":"+f())
}

// mostly returns f's value, and now and then a value of any type.
func (g *bodyGen) mostly(f func() string) string {
	if g.rng.IntN(40) == 0 {
		return g.any()
	}
	return f()
}

// loose is mostly for members validation does not type-check (only the
// normalizer does): a value of any type a fifth of the time.
func (g *bodyGen) loose(f func() string) string {
	if g.rng.IntN(5) == 0 {
		return g.any()
	}
	return f()
}

func (g *bodyGen) any() string {
	return g.pick(
		func() string { return "null" }, func() string { return "true" }, func() string { return "7" },
		func() string { return "-1.5e3" }, g.str, func() string { return "[]" }, func() string { return "{}" },
		func() string { return `[{"a":1}]` }, func() string { return `{"a":[1,"x"]}` })
}

func (g *bodyGen) str() string {
	return g.pick(
		func() string { return `"hi"` }, func() string { return `""` },
		func() string { return `"line\nbreak \"quoted\" \u00e9 \ud83d\ude00"` },
		func() string { return `"lone \ud800 surrogate"` }, func() string { return `"é ünïcode <tag> & more"` },
		func() string { return `"` + strings.Repeat("long text ", g.rng.IntN(50)) + `"` })
}

func (g *bodyGen) stringish() string { return g.mostly(g.str) }

// reasoningText is an earlier turn's reasoning: mostly a string, empty or
// not, sometimes null (as absent).
func (g *bodyGen) reasoningText() string {
	return g.mostly(func() string { return g.pick(g.str, g.str, func() string { return "null" }) })
}
func (g *bodyGen) boolish() string {
	return g.mostly(func() string { return g.pick(func() string { return "true" }, func() string { return "false" }) })
}

func (g *bodyGen) number() string {
	return g.mostly(func() string {
		return g.pick(func() string { return "0.5" }, func() string { return "1" }, func() string { return "-0" },
			func() string { return "2e-3" }, func() string { return "1e400" }, func() string { return strconv.Itoa(g.rng.IntN(3)) })
	})
}

func (g *bodyGen) intish() string {
	return g.mostly(func() string {
		if g.rng.IntN(8) == 0 {
			return g.pick(func() string { return "7.5" }, func() string { return "1e7" }, func() string { return "2147483648" },
				func() string { return "0" }, func() string { return "-1" })
		}
		return g.pick(func() string { return strconv.Itoa(1 + g.rng.IntN(2000)) }, func() string { return "1e3" },
			func() string { return "7.0" })
	})
}

func (g *bodyGen) seed() string {
	return g.mostly(func() string {
		return g.pick(func() string { return strconv.FormatInt(g.rng.Int64(), 10) },
			func() string { return strconv.FormatInt(-g.rng.Int64(), 10) },
			func() string { return "9007199254740993" }, func() string { return "9223372036854775807" },
			func() string { return "-9223372036854775808" }, func() string { return "9223372036854775808" },
			func() string { return "9.223372036854775807e18" }, func() string { return "1e18" }, func() string { return "42" })
	})
}

func (g *bodyGen) messages() string {
	if g.rng.IntN(40) == 0 {
		return g.any()
	}
	n := 1 + g.rng.IntN(4)
	ms := make([]string, n)
	for i := range ms {
		ms[i] = g.message()
	}
	return "[" + strings.Join(ms, ",") + "]"
}

func (g *bodyGen) message() string {
	if g.rng.IntN(40) == 0 {
		return g.any()
	}
	roles := []string{"system", "developer", "user", "assistant", "tool"}
	role := roles[g.rng.IntN(len(roles))]
	if g.rng.IntN(40) == 0 {
		role = g.pick(func() string { return "function" }, func() string { return "User" })
	}
	m := []string{`"role":` + g.mostly(func() string { return strconv.Quote(role) })}
	if role != "assistant" || g.rng.IntN(3) != 0 {
		m = append(m, `"content":`+g.content())
	}
	m = g.maybe(m, "name", g.stringish)
	m = g.maybe(m, "tool_call_id", g.stringish)
	m = g.maybe(m, "reasoning", g.reasoningText)
	m = g.maybe(m, "reasoning_content", g.reasoningText)
	if g.rng.IntN(3) == 0 {
		m = append(m, `"tool_calls":`+g.mostly(func() string {
			calls := make([]string, 1+g.rng.IntN(2))
			for i := range calls {
				calls[i] = g.toolCall()
			}
			return "[" + strings.Join(calls, ",") + "]"
		}))
	}
	g.rng.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
	return "{" + strings.Join(m, ",") + "}"
}

func (g *bodyGen) content() string {
	return g.mostly(func() string {
		if g.rng.IntN(10) == 0 {
			return "null"
		}
		return g.pick(g.str, func() string {
			parts := make([]string, 1+g.rng.IntN(3))
			for i := range parts {
				parts[i] = g.part()
			}
			return "[" + strings.Join(parts, ",") + "]"
		})
	})
}

func (g *bodyGen) part() string {
	return g.mostly(func() string {
		switch g.rng.IntN(5) {
		case 0:
			return `{"type":"text","text":` + g.stringish() + `}`
		case 3:
			return `{"type":"refusal","refusal":` + g.stringish() + `}`
		case 1:
			img := g.mostly(func() string { return `{"url":` + g.loose(g.str) + `,"detail":` + g.loose(g.str) + `}` })
			return `{"type":"image_url","image_url":` + img + `}`
		case 2:
			return `{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}`
		}
		return `{"type":` + g.stringish() + `,"text":` + g.stringish() + `,"image_url":` + g.any() + `}`
	})
}

func (g *bodyGen) toolCall() string {
	return g.mostly(func() string {
		fn := g.mostly(func() string {
			return `{"name":` + g.loose(g.str) + `,"arguments":` + g.pick(g.str, g.any, func() string { return `"{\"x\":1}"` }) + `}`
		})
		return `{"id":` + g.loose(g.str) + `,"type":"function","function":` + g.loose(func() string { return fn }) + `}`
	})
}

func (g *bodyGen) tools() string {
	return g.mostly(func() string {
		ts := make([]string, 1+g.rng.IntN(3))
		for i := range ts {
			ts[i] = g.mostly(func() string {
				typ := g.mostly(func() string {
					return g.pick(func() string { return `"function"` }, func() string { return `"function"` }, func() string { return `"custom"` })
				})
				fn := g.mostly(func() string {
					return fmt.Sprintf(`{"name":%s,"description":%s,"parameters":%s,"strict":%s}`,
						g.pick(func() string { return fmt.Sprintf(`"f%d"`, g.rng.IntN(3)) }, g.stringish),
						g.stringish(), g.pick(func() string { return `{"type":"object"}` }, g.any), g.loose(g.boolish))
				})
				return `{"type":` + typ + `,"function":` + fn + `}`
			})
		}
		return "[" + strings.Join(ts, ",") + "]"
	})
}

func (g *bodyGen) toolChoice() string {
	return g.mostly(func() string {
		return g.pick(func() string { return `"auto"` }, func() string { return `"none"` }, func() string { return `"required"` },
			func() string { return `"sometimes"` },
			func() string { return `{"type":"function","function":{"name":` + g.stringish() + `}}` },
			func() string { return `{"type":` + g.stringish() + `,"function":` + g.any() + `}` })
	})
}

func (g *bodyGen) responseFormat() string {
	return g.mostly(func() string {
		js := g.mostly(func() string {
			return `{"name":` + g.loose(g.str) + `,"schema":` + g.pick(func() string { return `{"type":"object"}` }, g.any) +
				`,"strict":` + g.loose(g.boolish) + `}`
		})
		js = g.loose(func() string { return js })
		typ := g.pick(func() string { return `"text"` }, func() string { return `"json_object"` },
			func() string { return `"json_schema"` }, func() string { return `"xml"` }, g.any, g.any)
		return `{"type":` + typ + `,"json_schema":` + js + `}`
	})
}
