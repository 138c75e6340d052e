package openaiapi

import (
	"errors"
	"strings"
	"testing"
)

// A number too large for a float64 is still a number: the error says what
// is wrong with its value and names the parameter, on validation and on the
// run path alike, and echoes a bounded part of a long literal.
func TestOutOfRangeNumberIsAnInvalidValue(t *testing.T) {
	huge := "9" + strings.Repeat("0", 400)
	for _, tc := range []struct {
		name, param, value string
		parse              func([]byte) error
		body               func(member string) string
	}{
		{"chat", "temperature", "1e400", chat, chatWith},
		{"chat negative", "top_p", "-1e400", chat, chatWith},
		{"chat long literal", "presence_penalty", huge, chat, chatWith},
		{"completion", "frequency_penalty", "2E+999", completion, func(m string) string {
			return `{"model":"m","prompt":"hi",` + m + `}`
		}},
		{"run path", "temperature", "1e400", func(b []byte) error { _, err := NormalizeChat(b); return err }, chatWith},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse([]byte(tc.body(`"` + tc.param + `":` + tc.value)))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if e.Status != 400 || paramOf(e) != tc.param {
				t.Fatalf("status %d param %s, want 400 %s", e.Status, paramOf(e), tc.param)
			}
			if !strings.HasPrefix(e.Message, "Invalid value for '"+tc.param+"'") || strings.Contains(e.Message, "but got a number") {
				t.Fatalf("message %q does not say the value is out of range", e.Message)
			}
			if len(e.Message) > 200 {
				t.Fatalf("message is %d bytes: %q", len(e.Message), e.Message)
			}
		})
	}
}

func chatWith(member string) string {
	return `{"model":"m","messages":[{"role":"user","content":"hi"}],` + member + `}`
}

// An integer parameter out of range names its bounds and echoes a bounded
// part of the value: a valid literal can be as long as the body.
func TestOutOfRangeIntegerMessageIsBounded(t *testing.T) {
	for _, v := range []string{"1" + strings.Repeat("0", 5000), "1" + strings.Repeat("0", 5000) + ".0"} {
		err := chat([]byte(chatWith(`"max_tokens":` + v)))
		var e *Error
		if !errors.As(err, &e) || paramOf(e) != "max_tokens" {
			t.Fatalf("err = %v, want a 400 naming max_tokens", err)
		}
		if !strings.Contains(e.Message, "between 1 and 1000000") || len(e.Message) > 200 {
			t.Fatalf("message (%d bytes) = %.300q", len(e.Message), e.Message)
		}
	}
}
