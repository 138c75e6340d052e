package adapter

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An HTTP-date is rounded up to the next whole second: a client told to
// wait 29.5 s must not come back at 29.
func TestParseRetryAfterDateRoundsUp(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 500_000_000, time.UTC)
	if got := ParseRetryAfter(now.Add(29500*time.Millisecond).Format(http.TimeFormat), now); got != 30 {
		t.Fatalf("ParseRetryAfter(12:00:30 at 12:00:00.5) = %d, want 30", got)
	}
}

// The error's text names its code, message and cause; errors.Is and
// errors.As reach the cause.
func TestErrorTextAndCause(t *testing.T) {
	cause := errors.New("dial refused")
	e := &Error{Code: CodeUpstream, Message: "provider down", Err: cause}
	if got, want := e.Error(), "upstream: provider down: dial refused"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, cause) {
		t.Fatal("errors.Is does not reach the cause")
	}
	if got := (&Error{Code: CodeCapacityExceeded, Message: "full"}).Error(); got != "capacity_exceeded: full" {
		t.Fatalf("Error() without a cause = %q", got)
	}
}

// Answers too large for the wire are the provider's failure (upstream),
// except embeddings, which the caller can split (invalid request); all
// wrap ErrAnswerTooLarge.
func TestTooLargeErrors(t *testing.T) {
	for _, tc := range []struct {
		e    *Error
		code iop.ErrorCode
	}{{AnswerTooLarge(), CodeUpstream}, {ToolCallsTooLarge(), CodeUpstream}, {EmbeddingsTooLarge(), CodeInvalidRequest}} {
		if tc.e.Code != tc.code || !errors.Is(tc.e, ErrAnswerTooLarge) || !strings.Contains(tc.e.Message, "MiB") {
			t.Errorf("%+v: want code %v wrapping ErrAnswerTooLarge", tc.e, tc.code)
		}
	}
}

func textPart(s string) *iop.ContentPart {
	return &iop.ContentPart{Part: &iop.ContentPart_Text{Text: s}}
}

// Text parts join with a newline; images are left out of the text and
// listed apart.
func TestMessageTextAndImages(t *testing.T) {
	img := &iop.ContentPart{Part: &iop.ContentPart_Image{Image: &iop.ImagePart{}}}
	m := &iop.ChatMessage{Content: []*iop.ContentPart{textPart("a"), img, textPart("b")}}
	if got := MessageText(m); got != "a\nb" {
		t.Fatalf("MessageText = %q, want %q", got, "a\nb")
	}
	if got := MessageImages(m); len(got) != 1 {
		t.Fatalf("MessageImages = %d images, want 1", len(got))
	}
	if got := MessageText(&iop.ChatMessage{Content: []*iop.ContentPart{img}}); got != "" {
		t.Fatalf("MessageText of an image alone = %q", got)
	}
}

func TestRoleNames(t *testing.T) {
	for r, want := range map[iop.ChatRole]string{
		iop.ChatRole_CHAT_ROLE_SYSTEM: "system", iop.ChatRole_CHAT_ROLE_DEVELOPER: "developer", iop.ChatRole_CHAT_ROLE_USER: "user",
		iop.ChatRole_CHAT_ROLE_ASSISTANT: "assistant", iop.ChatRole_CHAT_ROLE_TOOL: "tool", iop.ChatRole_CHAT_ROLE_UNSPECIFIED: "",
	} {
		if got := RoleName(r); got != want {
			t.Errorf("RoleName(%v) = %q, want %q", r, got, want)
		}
	}
}

// Tools count as offered unless tool_choice is none.
func TestToolsOffered(t *testing.T) {
	tools := []*iop.ToolDefinition{{}}
	for _, tc := range []struct {
		in   *iop.RunInput
		want bool
	}{
		{&iop.RunInput{}, false},
		{&iop.RunInput{Tools: tools}, true},
		{&iop.RunInput{Tools: tools, ToolChoice: &iop.ToolChoice{Mode: iop.ToolChoiceMode_TOOL_CHOICE_MODE_NONE}}, false},
		{&iop.RunInput{Tools: tools, ToolChoice: &iop.ToolChoice{Mode: iop.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED}}, true},
	} {
		if got := ToolsOffered(tc.in); got != tc.want {
			t.Errorf("ToolsOffered(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
