package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file whose top level is a bare string (a secret pasted into the
// config's path, a token file named by mistake) is refused without its
// first bytes: go-yaml quotes them into its unmarshal error, and the
// error reaches logs.
func TestSyntaxErrorQuotesNoValue(t *testing.T) {
	for _, body := range []string{"hunter2secretvalue\n", "\"hunter2 with `ticks`\"\n", "42424242\n"} {
		file := filepath.Join(t.TempDir(), "x.yaml")
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadEdge(file)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("%q: %v, want a *SyntaxError", body, err)
		}
		msg := err.Error()
		if strings.Contains(msg, "hunter") || strings.Contains(msg, "4242") || strings.Contains(msg, "`") {
			t.Errorf("%q: the value is quoted: %q", body, msg)
		}
		if !strings.Contains(msg, ": line 1: cannot unmarshal !!") {
			t.Errorf("%q: %q, want the line and the YAML type", body, msg)
		}
	}
}

func TestWithoutQuotedValues(t *testing.T) {
	for in, want := range map[string]string{
		"line 1: cannot unmarshal !!str `hunter2...` into map[string]interface {}": "line 1: cannot unmarshal !!str into map[string]interface {}",
		"line 2: cannot unmarshal !!int `4242` into string":                        "line 2: cannot unmarshal !!int into string",
		"no quotes at all":                     "no quotes at all",
		"an unpaired ` quote is left as it is": "an unpaired ` quote is left as it is",
		"two `a` and `b` values":               "two and values",
	} {
		if got := withoutQuotedValues(in); got != want {
			t.Errorf("withoutQuotedValues(%q) = %q, want %q", in, got, want)
		}
	}
}
