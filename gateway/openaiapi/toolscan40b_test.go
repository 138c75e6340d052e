package openaiapi

import (
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testlinear"
)

// TestToolHolderOneDeltaOfManyBlocksIsLinear40b: a node's run event may
// carry one delta of up to a frame (16 MiB) holding many <tool_call>
// blocks, valid or not. The scanner used to move what followed each block
// to the front of its buffer, block by block: a delta of n blocks cost
// n times its length (1.6 MB of blocks took seconds). Eight times the
// blocks must cost about eight times as long, well below the 64 times a
// rescan per block costs.
func TestToolHolderOneDeltaOfManyBlocksIsLinear40b(t *testing.T) {
	testlinear.SkipUnderRace(t)
	for _, unit := range []string{
		"x<tool_call>a</tool_call>",                          // text between invalid blocks
		`<tool_call>{"name":"f","arguments":{}}</tool_call>`, // valid calls, back to back
	} {
		run := func(n int) time.Duration {
			delta := strings.Repeat(unit, n)
			return testlinear.Fastest(func() {
				h := newToolHolder([]string{"f"})
				h.mark()
				h.push(delta)
				h.finish(true)
			})
		}
		const n = 4 << 10
		small, large := run(n), run(8*n)
		if ratio := float64(large) / float64(max(small, time.Microsecond)); ratio > 24 {
			t.Errorf("%q: %d blocks took %v, %d blocks %v (%.0f×)", unit, n, small, 8*n, large, ratio)
		}
	}
}

// TestToolScannerSplitAcrossBlocks40b: the scanner's output is the same
// whether a stream of blocks comes as one delta or cut anywhere, with the
// held partial tag and the held open block carried across pieces.
func TestToolScannerSplitAcrossBlocks40b(t *testing.T) {
	content := strings.Repeat(`a<tool_call>{"name":"f","arguments":{"k":"v"}}</tool_call>b<tool_call>bad</tool_call>`, 50) + "<tool_ca"
	collect := func(pieces []string) (out []string) {
		s := textToolScanner{offered: offeredSet([]string{"f"})}
		emit := func(seg segment) {
			if seg.call != nil {
				out = append(out, "CALL:"+seg.call.Function.Name+seg.call.Function.Arguments)
				return
			}
			out = append(out, seg.text)
		}
		for _, p := range pieces {
			s.feed(p, emit)
		}
		s.finish(emit)
		return out
	}
	join := func(segs []string) string { return strings.Join(segs, "|") }
	// Adjacent text segments may be cut differently; merge them.
	norm := func(segs []string) string {
		var b strings.Builder
		for _, s := range segs {
			if strings.HasPrefix(s, "CALL:") || strings.HasPrefix(s, "<tool_call>") && strings.HasSuffix(s, "</tool_call>") {
				b.WriteString("|" + s + "|")
				continue
			}
			b.WriteString(s)
		}
		return b.String()
	}
	want := norm(collect([]string{content}))
	if !strings.Contains(want, `CALL:f{"k":"v"}`) || !strings.Contains(want, "|<tool_call>bad</tool_call>|") {
		t.Fatalf("whole: %s", join(collect([]string{content})))
	}
	for cut := 1; cut < len(content); cut += 13 {
		for step := 1; step <= 97; step += 32 {
			var pieces []string
			for i := 0; i < len(content); {
				j := min(len(content), i+cut)
				if i > 0 {
					j = min(len(content), i+step)
				}
				pieces = append(pieces, content[i:j])
				i = j
			}
			if got := norm(collect(pieces)); got != want {
				t.Fatalf("cut %d step %d:\n got %s\nwant %s", cut, step, got, want)
			}
		}
	}
}
