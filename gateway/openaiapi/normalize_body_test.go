package openaiapi

import (
	"errors"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The Normalize* functions, given a body rather than a parsed request,
// refuse a second model or a case variant of it as the Parse* functions
// do: a provider reading the other copy would run another model than the
// one the edge routed by.
func TestNormalizeBodyRefusesAmbiguousModel(t *testing.T) {
	normalizers := map[string]struct {
		fn   func([]byte) (*iop.RunInput, error)
		rest string
	}{
		"chat":       {NormalizeChat, `"messages":[{"role":"user","content":"hi"}]`},
		"completion": {NormalizeCompletion, `"prompt":"hi"`},
		"embedding":  {NormalizeEmbedding, `"input":"hi"`},
	}
	for name, n := range normalizers {
		for _, tc := range []struct{ models, param string }{
			{`"model":"a","MODEL":"b"`, "MODEL"},
			{`"Model":"b","model":"a"`, "Model"},
			{`"model":"a","model":"b"`, "model"},
		} {
			body := []byte(`{` + tc.models + `,` + n.rest + `}`)
			in, err := n.fn(body)
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || paramOf(e) != tc.param {
				t.Errorf("%s %s: input %v, err %v; want a 400 naming %s", name, body, in, err, tc.param)
			}
		}
	}
}
