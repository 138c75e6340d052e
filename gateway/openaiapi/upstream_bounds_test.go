package openaiapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// An upstream's own type and code are kept only while short: a long one
// is no error class but text (or an attempt to fill the client's logs),
// and the edge's own type and code stand in for it.
func TestUpstreamLongTypeAndCodeAreReplaced(t *testing.T) {
	long := strings.Repeat("x", 65)
	for _, tc := range []struct{ typ, code, wantType, wantCode string }{
		{long, long, TypeInvalidRequest, CodeInvalidRequest},
		{"BadRequestError", "bad_value", "BadRequestError", "bad_value"},
		{strings.Repeat("y", 64), long, strings.Repeat("y", 64), CodeInvalidRequest},
	} {
		body := `{"object":"error","message":"no","type":"` + tc.typ + `","code":"` + tc.code + `"}`
		st, out := NormalizeUpstreamError(400, "application/json", []byte(body))
		var env struct {
			Error struct{ Message, Type, Code string }
		}
		if err := json.Unmarshal(out, &env); err != nil || st != 400 {
			t.Fatalf("%s: status %d body %s (%v)", body, st, out, err)
		}
		if env.Error.Message != "no" || env.Error.Type != tc.wantType || env.Error.Code != tc.wantCode {
			t.Errorf("%s: got %+v, want type %s code %s", body, env.Error, tc.wantType, tc.wantCode)
		}
	}
}

// A plain-text error answer becomes the message only while it is short;
// a longer one (an HTML page served as text, a stack trace) gives way to
// the generic message.
func TestUpstreamPlainTextMessageIsBounded(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"upstream overloaded", "upstream overloaded"},
		{strings.Repeat("a", maxUpstreamMessage), strings.Repeat("a", maxUpstreamMessage)},
		{strings.Repeat("a", maxUpstreamMessage+1), "The provider answered HTTP 503."},
	} {
		_, out := NormalizeUpstreamError(503, "text/plain; charset=utf-8", []byte(tc.body))
		var env struct{ Error struct{ Message string } }
		if err := json.Unmarshal(out, &env); err != nil {
			t.Fatalf("body %s: %v", out, err)
		}
		if env.Error.Message != tc.want {
			t.Errorf("%d-byte text: message %.60q…, want %.60q…", len(tc.body), env.Error.Message, tc.want)
		}
	}
}
