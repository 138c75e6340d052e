package fleetbench

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The nginx reference is stopped with its workers: after its cleanup
// nothing serves its port any more. A master killed alone leaves its
// worker serving the port for good, one more with every run.
func TestNginxStopsWithWorkers(t *testing.T) {
	urls := startSims(t)
	var base string
	t.Run("serve", func(t *testing.T) { base = startNginx(t, urls) })
	if base == "" {
		t.Skip("nginx did not start (not installed?)")
	}
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after nginx's cleanup: a worker outlived its master", base)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", base, err)
	}
}
