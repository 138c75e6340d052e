package gateway

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testlinear"
)

// TestMessagesWriterSSEIsLinear40b: the Messages surface converts an
// upstream's event stream as it arrives, so what a hostile or broken
// upstream sends in bulk must cost its length: thousands of tiny events
// in one write, one event cut into one-byte writes, lone-CR line ends,
// and events of comments only. Four times the input must cost well under
// the sixteen times a rescan per piece would.
func TestMessagesWriterSSEIsLinear40b(t *testing.T) {
	testlinear.SkipUnderRace(t)
	event := "data: " + `{"choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n"
	for _, c := range []struct {
		name   string
		n      int
		stream func(n int) ([]byte, []int)
	}{
		{"tiny events in one write", 4 << 10, func(n int) ([]byte, []int) {
			return []byte(strings.Repeat(event, n) + "data: [DONE]\n\n"), nil
		}},
		{"one event in one-byte writes", 64 << 10, func(n int) ([]byte, []int) {
			s := []byte("data: " + `{"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("b", n) + `"}}]}` + "\n\ndata: [DONE]\n\n")
			cuts := make([]int, len(s))
			for i := range cuts {
				cuts[i] = i
			}
			return s, cuts
		}},
		{"lone CR line ends", 4 << 10, func(n int) ([]byte, []int) {
			return []byte(strings.ReplaceAll(strings.Repeat(event, n), "\n", "\r") + "data: [DONE]\r\r"), nil
		}},
		{"comment-only events", 256 << 10, func(n int) ([]byte, []int) {
			return []byte(event + strings.Repeat(":\n\n", n) + "data: [DONE]\n\n"), nil
		}},
	} {
		measure := func(n int) time.Duration {
			s, cuts := c.stream(n)
			var out []byte
			d := testlinear.Fastest(func() { out = convertSSE(t, s, cuts) })
			if !bytes.Contains(out, []byte("event: message_stop")) {
				t.Fatalf("%s: stream did not complete: %.200s", c.name, out)
			}
			return d
		}
		small, large := measure(c.n), measure(4*c.n)
		ratio := float64(large) / float64(max(small, 50*time.Microsecond))
		t.Logf("%s: n=%d %v, 4n %v (%.1f×)", c.name, c.n, small, large, ratio)
		if ratio > 10 {
			t.Errorf("%s: n=%d took %v, 4n %v (%.1f×): superlinear", c.name, c.n, small, large, ratio)
		}
	}
}
