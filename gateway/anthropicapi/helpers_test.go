package anthropicapi

import (
	"bytes"
	"encoding/json"
	"testing"
)

// compact returns s without insignificant whitespace, failing the test on
// invalid JSON.
func compact(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		t.Fatalf("bad JSON in test: %v\n%s", err, s)
	}
	return buf.String()
}

func mustParse(t *testing.T, body string) *Request {
	t.Helper()
	r, e := ParseRequest([]byte(body))
	if e != nil {
		t.Fatalf("ParseRequest(%s): %v", body, e)
	}
	return r
}
