package anthropicapi

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testlinear"
)

// checkLinear40b times work(n) and work(4n): four times the input must
// cost well under the sixteen times a rescan per piece would. The sizes
// are past the caches at n already, so that both sizes cost alike per
// byte.
func checkLinear40b(t *testing.T, name string, n int, work func(n int)) {
	t.Helper()
	checkLinearPrepared40b(t, name, n, func(n int) func() { return func() { work(n) } })
}

// checkLinearPrepared40b is checkLinear40b for work whose input is built
// first (prepare), out of the timing.
func checkLinearPrepared40b(t *testing.T, name string, n int, prepare func(n int) func()) {
	t.Helper()
	small := testlinear.Fastest(prepare(n))
	large := testlinear.Fastest(prepare(4 * n))
	ratio := float64(large) / float64(max(small, 50*time.Microsecond))
	t.Logf("%s: n=%d %v, 4n %v (%.1f×)", name, n, small, large, ratio)
	if ratio > 10 {
		t.Errorf("%s: n=%d took %v, 4n %v (%.1f×): superlinear", name, n, small, large, ratio)
	}
}

// TestStreamWriterWorkIsLinear40b feeds the stream writer what a hostile
// or broken upstream can send in bulk (about 1 MiB at the larger size):
// the cost per byte must not grow with what came before.
func TestStreamWriterWorkIsLinear40b(t *testing.T) {
	testlinear.SkipUnderRace(t)
	chunk := func(delta string) []byte {
		return []byte(`{"choices":[{"index":0,"delta":` + delta + `}]}`)
	}
	feed := func(thinking bool, chunks ...[]byte) func(n int) {
		return func(n int) {
			s := NewStreamWriter(io.Discard, nil, "m", 1, nil, thinking)
			for i := range n {
				if err := s.Chunk(chunks[i%len(chunks)]); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Finish(); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkLinear40b(t, "tiny text chunks", 4<<10, feed(false, chunk(`{"content":"a"}`)))
	checkLinear40b(t, "one call's argument fragments", 4<<10, func(n int) {
		s := NewStreamWriter(io.Discard, nil, "m", 1, nil, false)
		if err := s.Chunk(chunk(`{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{\"k\":\""}}]}`)); err != nil {
			t.Fatal(err)
		}
		frag := chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"[{\\\\\\\"\\\\"}}]}`)
		for range n {
			if err := s.Chunk(frag); err != nil {
				t.Fatal(err)
			}
		}
	})
	checkLinear40b(t, "reasoning held inside a call", 4<<10, func(n int) {
		s := NewStreamWriter(io.Discard, nil, "m", 1, nil, true)
		if err := s.Chunk(chunk(`{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{"}}]}`)); err != nil {
			t.Fatal(err)
		}
		r := chunk(`{"reasoning":"` + strings.Repeat("r", 40) + `"}`)
		for range n {
			if err := s.Chunk(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Finish(); err != nil {
			t.Fatal(err)
		}
	})
	checkLinear40b(t, "calls held behind an open call", maxToolCalls/4-1, func(n int) {
		s := NewStreamWriter(io.Discard, nil, "m", 1, nil, false)
		if err := s.Chunk(toolChunk40b(0, "{")); err != nil {
			t.Fatal(err)
		}
		// Indexes in descending order: the held calls are sorted at the end.
		for i := n; i > 0; i-- {
			if err := s.Chunk(toolChunk40b(i, `{"a":`)); err != nil {
				t.Fatal(err)
			}
		}
		for i := 1; i <= n; i++ {
			if err := s.Chunk(fmt.Appendf(nil, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":"1}"}}]}}]}`, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Finish(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTemplateThinkingOffIsLinear40b: the scan of a chat body (rendered
// from a client's request) over long runs of escapes, deep nesting and
// many members, escaped keys among them.
func TestTemplateThinkingOffIsLinear40b(t *testing.T) {
	testlinear.SkipUnderRace(t)
	run := func(body func(n int) []byte) func(n int) func() {
		return func(n int) func() {
			b := body(n)
			return func() {
				if _, err := WithTemplateThinkingOff(b); err != nil {
					t.Fatalf("%.80s: %v", b, err)
				}
			}
		}
	}
	checkLinearPrepared40b(t, "escapes", 256<<10, run(func(n int) []byte {
		return []byte(`{"a":"` + strings.Repeat(`\\\"\u00e9`, n) + `"}`)
	}))
	checkLinearPrepared40b(t, "nesting", 1<<10, run(func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat(`[{"b":`, n) + `1` + strings.Repeat(`}]`, n) + `}`)
	}))
	checkLinearPrepared40b(t, "escaped keys", 16<<10, run(func(n int) []byte {
		var b bytes.Buffer
		b.WriteString(`{`)
		for i := range n {
			fmt.Fprintf(&b, `"ch\u0061t_template_kwargs%d":{"x":%d},`, i, i)
		}
		b.WriteString(`"chat_template_kwargs":{"x":1}}`)
		return b.Bytes()
	}))
}

// TestStrictSchemaIsLinear40b: a client's output format or strict tool
// schema is walked for OpenAI's strict mode; wide objects, long $ref
// pointers and long patterns cost their length.
func TestStrictSchemaIsLinear40b(t *testing.T) {
	testlinear.SkipUnderRace(t)
	parse := func(schema func(n int) string) func(n int) func() {
		return func(n int) func() {
			body := []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json_schema","schema":` + schema(n) + `}}}`)
			return func() {
				if _, e := ParseRequest(body); e != nil {
					t.Fatal(e)
				}
			}
		}
	}
	checkLinearPrepared40b(t, "wide object", 1<<10, parse(func(n int) string {
		var props, req []string
		for i := range n {
			props = append(props, fmt.Sprintf(`"p%d":{"type":"string","enum":["a","b"]}`, i))
			req = append(req, fmt.Sprintf(`"p%d"`, i))
		}
		return `{"type":"object","additionalProperties":false,"properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `]}`
	}))
	checkLinearPrepared40b(t, "long $ref pointers", 16, parse(func(n int) string {
		ref := `"#/$defs/d` + strings.Repeat("/properties/d", 8) + `"`
		var props, req []string
		for i := range n * 64 {
			props = append(props, fmt.Sprintf(`"p%d":{"$ref":%s}`, i, ref))
			req = append(req, fmt.Sprintf(`"p%d"`, i))
		}
		nested := `{"type":"string"}`
		for range 8 {
			nested = `{"type":"object","additionalProperties":false,"properties":{"d":` + nested + `},"required":["d"]}`
		}
		return `{"type":"object","additionalProperties":false,"$defs":{"d":` + nested + `},"properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `]}`
	}))
	checkLinearPrepared40b(t, "long pattern", 64<<10, parse(func(n int) string {
		return `{"type":"object","additionalProperties":false,"properties":{"p":{"type":"string","pattern":"` + strings.Repeat(`[(?=]\\(`, n) + `"}},"required":["p"]}`
	}))
}

// TestParseRequestIsLinear40b: a client's request of many turns, tool
// uses and their results, parsed and rendered as the chat body, costs
// its length.
func TestParseRequestIsLinear40b(t *testing.T) {
	testlinear.SkipUnderRace(t)
	checkLinearPrepared40b(t, "many tool turns", 1024, func(n int) func() {
		var msgs []string
		for i := range n {
			msgs = append(msgs,
				fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""},{"type":"text","text":"x"},{"type":"tool_use","id":"t%d","name":"f","input":{"q":"%d"}}]}`, i, i),
				fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":[{"type":"text","text":"r"}]},{"type":"text","text":"go on"}]}`, i))
		}
		body := []byte(`{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"},` + strings.Join(msgs, ",") + `]}`)
		return func() {
			r, e := ParseRequest(body)
			if e != nil {
				t.Fatal(e)
			}
			if _, err := r.OpenAIChat(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
