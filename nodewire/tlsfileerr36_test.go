package nodewire

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/iop-gateway/iop/internal/testcert"
)

// The TLS builders say which file did not load, by its config key's last
// part and its path, so that the binaries can name the key in full: a
// file that cannot be read alone, a pair whose key is not its
// certificate's both, a CA its own key.
func TestTLSFileErrorNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "ca")
	cert, key := ca.Issue(t, "edge", true)
	other, _ := ca.Issue(t, "other", true)
	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("no pem here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		build    func() error
		fields   []string
		files    []string
		notExist bool
	}{
		{"server cert missing", func() error { _, err := ServerTLSConfig(missing, key, "", nil); return err },
			[]string{"cert_file"}, []string{missing}, true},
		{"server key missing", func() error { _, err := ServerTLSConfig(cert, missing, "", nil); return err },
			[]string{"key_file"}, []string{missing}, true},
		{"server pair mismatch", func() error { _, err := ServerTLSConfig(other, key, "", nil); return err },
			[]string{"cert_file", "key_file"}, []string{other, key}, false},
		{"client CA missing", func() error { _, err := ServerTLSConfig(cert, key, missing, nil); return err },
			[]string{"client_ca_file"}, []string{missing}, true},
		{"client CA no PEM", func() error { _, err := ServerTLSConfig(cert, key, notPEM, nil); return err },
			[]string{"client_ca_file"}, []string{notPEM}, false},
		{"node CA missing", func() error { _, err := NewClientTLS(missing, "", "", "", nil); return err },
			[]string{"ca_file"}, []string{missing}, true},
		{"node cert missing", func() error { _, err := NewClientTLS("", "", missing, key, nil); return err },
			[]string{"cert_file"}, []string{missing}, true},
		{"node key no PEM", func() error { _, err := NewClientTLS("", "", cert, notPEM, nil); return err },
			[]string{"cert_file", "key_file"}, []string{cert, notPEM}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.build()
			var fe *TLSFileError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *TLSFileError", err)
			}
			if !slices.Equal(fe.Fields, c.fields) || !slices.Equal(fe.Files, c.files) {
				t.Errorf("fields %v files %v, want %v %v", fe.Fields, fe.Files, c.fields, c.files)
			}
			if got := errors.Is(err, fs.ErrNotExist); got != c.notExist {
				t.Errorf("errors.Is(err, fs.ErrNotExist) = %v, want %v (%v)", got, c.notExist, err)
			}
		})
	}
}
