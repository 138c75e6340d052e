package nodewire

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// A key pair given as one file for both keys (a PEM holding the
// certificate and its key) that cannot be read names both keys: each
// names the missing file, and fixing cert_file alone, as a start line
// naming only it said, leaves key_file pointing at nothing.
func TestTLSFileErrorOneFileForBothNamesBoth(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "both.pem")
	for name, build := range map[string]func() error{
		"server": func() error { _, err := ServerTLSConfig(missing, missing, "", nil); return err },
		"client": func() error { _, err := NewClientTLS("", "", missing, missing, nil); return err },
	} {
		var fe *TLSFileError
		if err := build(); !errors.As(err, &fe) {
			t.Fatalf("%s: %v, want a *TLSFileError", name, err)
		}
		if want := []string{"cert_file", "key_file"}; !slices.Equal(fe.Fields, want) || !slices.Equal(fe.Files, []string{missing, missing}) {
			t.Errorf("%s: fields %v files %v, want %v both naming %s", name, fe.Fields, fe.Files, want, missing)
		}
	}
}
