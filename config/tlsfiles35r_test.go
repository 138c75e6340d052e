package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcert"
)

// --check-config reads each TLS file bounded: a FIFO named as a key file
// (no writer) is refused at once, where the open blocked --check-config
// forever; a directory is not a regular file; a file past maxCheckFile is
// refused unread, where it was read whole into memory. Each is named by
// its key, for the edge and the node.
func TestCheckFilesNotRegularOrHuge(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "ca")
	cert, key := ca.Issue(t, "edge", true)
	fifo := filepath.Join(dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	huge := filepath.Join(dir, "huge.pem")
	if err := os.WriteFile(huge, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, maxCheckFile+1); err != nil {
		t.Fatal(err)
	}
	// Exactly at the bound: read, and refused only as no PEM.
	atBound := filepath.Join(dir, "atbound.pem")
	if err := os.WriteFile(atBound, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(atBound, maxCheckFile); err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { return `"` + s + `"` }
	for _, tc := range []struct {
		name              string
		cert, key, caFile string
		want              string
	}{
		{"key a FIFO", cert, fifo, "", "listen.tls.key_file: " + q(fifo) + " cannot be read: not a regular file"},
		{"cert a FIFO", fifo, key, "", "listen.tls.cert_file: " + q(fifo) + " cannot be read: not a regular file"},
		{"CA a FIFO", cert, key, fifo, "listen.tls.client_ca_file: " + q(fifo) + " cannot be read: not a regular file"},
		{"key a directory", cert, dir, "", "listen.tls.key_file: " + q(dir) + " cannot be read: not a regular file"},
		{"key huge", cert, huge, "", "listen.tls.key_file: " + q(huge) + " cannot be read: larger than 8 MiB"},
		{"CA huge", cert, key, huge, "listen.tls.client_ca_file: " + q(huge) + " cannot be read: larger than 8 MiB"},
		{"CA at the bound", cert, key, atBound, "listen.tls.client_ca_file: " + q(atBound) + " holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Only a FIFO can block the open, and the FIFO cases read no
			// more than a certificate besides: they alone run under the
			// hang guard. The huge files can only be slow (a loaded box
			// under -race took 4s to refuse one), and slow is no failure.
			run := func(check func() error) error { return check() }
			if tc.cert == fifo || tc.key == fifo || tc.caFile == fifo {
				run = func(check func() error) error { return checkFilesWithin(t, fifo, check) }
			}
			e := &Edge{}
			e.Listen.TLS = ServerTLS{CertFile: tc.cert, KeyFile: tc.key, ClientCAFile: tc.caFile}
			checkFilesResult(t, run(func() error { return e.CheckFiles("edge.yaml") }), tc.want)

			n := &Node{}
			n.Edge.TLS = ClientTLS{Enabled: true, CertFile: tc.cert, KeyFile: tc.key, CAFile: tc.caFile}
			checkFilesResult(t, run(func() error { return n.CheckFiles("node.yaml") }),
				strings.ReplaceAll(strings.ReplaceAll(tc.want, "listen.tls.client_ca_file", "edge.tls.ca_file"), "listen.tls", "edge.tls"))
		})
	}
}

// fifoHangGuard bounds a check that may block on a FIFO. It decides
// nothing on a working check (one that touches a FIFO opens it without
// blocking and reads at most a certificate), so it is generous for a
// loaded 2-core box under -race; a check that blocks fails after it.
const fifoHangGuard = 30 * time.Second

// checkFilesWithin runs check with a deadline: a FIFO's open blocks until
// a writer comes, so a check that opens it must fail here, not hang.
func checkFilesWithin(t *testing.T, fifo string, check func() error) error {
	t.Helper()
	done := make(chan error, 1)
	// Owner: this test. Ends when check returns; one blocked on the FIFO
	// is released by the writer opened below after the deadline.
	go func() { done <- check() }()
	select {
	case err := <-done:
		return err
	case <-time.After(fifoHangGuard):
		t.Errorf("CheckFiles still running after %v (blocked on the FIFO)", fifoHangGuard)
	}
	// A reader waits in open: a writer's open then succeeds, and its close
	// ends the read.
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
	select {
	case err := <-done:
		return err
	case <-time.After(fifoHangGuard):
		t.Fatalf("CheckFiles still running after the FIFO got a writer")
		return nil
	}
}
