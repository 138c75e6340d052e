package cli

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// A CLI runs as the Node's user: it must not be able to read the Node's
// environment (provider keys, the node token) through /proc.
func TestNodeEnvironmentHiddenFromCLI(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	r := newRig(t)
	inst := r.instance(t, []string{script(t, `cat /proc/$PPID/environ >/dev/null && echo readable`)}, nil)
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Fatalf("dumpable = %d, %v after a cli adapter was built; want 0", d, err)
	}
	if os.Geteuid() == 0 {
		return // root reads any process's environ
	}
	got, err := runSync(t, inst, userRun(t, "x"))
	if got == "readable\n" || errCode(err) != adapter.CodeUpstream {
		t.Fatalf("the CLI read the Node's environment: %q, %v", got, err)
	}
}
