//go:build !unix

package fleetbench

import "testing"

// startNginx skips: the reference nginx is stopped with its workers by
// signalling its process group, which this system does not have (a
// master killed alone leaves its workers serving the port).
func startNginx(b testing.TB, _ []string) string {
	b.Helper()
	b.Skip("the nginx reference needs Unix process groups")
	return ""
}
