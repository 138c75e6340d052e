package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/viper"
)

// A file that is not YAML is a *SyntaxError reading "config: FILE: line
// N: what" (viper's error still in its chain), for both configs; a
// top level that is not a mapping names its line too.
func TestSyntaxErrorNamesFileAndLine(t *testing.T) {
	cases := []struct{ body, want string }{
		{"listen:\n  http: 127.0.0.1:0\n  node: [\n", ": line 3: did not find expected node content"},
		{"a: b\n c: d\n", ": line 2: mapping values are not allowed in this context"},
		{"- a\n", ": line 1: cannot unmarshal !!seq into map[string]interface {}"},
	}
	for _, c := range cases {
		file := filepath.Join(t.TempDir(), "x.yaml")
		if err := os.WriteFile(file, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		for name, load := range map[string]func(string) error{
			"edge": func(f string) error { _, err := LoadEdge(f); return err },
			"node": func(f string) error { _, err := LoadNode(f); return err },
		} {
			err := load(file)
			var se *SyntaxError
			var pe viper.ConfigParseError
			if !errors.As(err, &se) || !errors.As(err, &pe) {
				t.Fatalf("%s %q: %v, want a *SyntaxError around a viper.ConfigParseError", name, c.body, err)
			}
			if want := "config: " + file + c.want; err.Error() != want {
				t.Errorf("%s: %q, want %q", name, err, want)
			}
			if strings.Contains(err.Error(), "While parsing") {
				t.Errorf("%s: viper's heading kept: %q", name, err)
			}
		}
	}
}
