package cli

import "golang.org/x/sys/unix"

// protectNode makes the Node's process non-dumpable. A CLI runs as the
// Node's user, and a dumpable process's /proc/<pid>/environ, mem and fd
// are open to every process of its user: the CLI (an agent that runs
// shell commands a prompt asks for) could read the Node's whole
// environment there (provider keys named by api_key_env, a token_env) and
// its memory, whatever the child's own environment leaves out. Only the
// Node changes: a CLI is dumpable again from its execve.
func protectNode() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
