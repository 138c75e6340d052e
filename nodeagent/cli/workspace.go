package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

const workspaceDirPerm = 0o750

// resolveWorkspace returns the real path of the directory a run executes in:
// root joined with the relative workspace ws ("" is the root itself). The
// directory is created when missing.
//
// Checks happen before anything is created: ws must be relative and free of
// ".." elements (lexical), and every existing component is resolved through
// its symlinks and must stay inside the root's real path before the next
// component is created. Creating component by component matters: a single
// MkdirAll would follow a symlink out of the root and create directories
// there before any check could run.
//
// A process racing us inside the root (swapping a checked directory for a
// symlink before the CLI starts) is not defended against; the root is
// assumed to be writable only by the Node and its runs.
func resolveWorkspace(root, ws string) (string, error) {
	if err := checkWorkspaceLexical(ws); err != nil {
		return "", err
	}
	if err := os.MkdirAll(root, workspaceDirPerm); err != nil {
		return "", internalErr("create workspace root", err)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", internalErr("resolve workspace root", err)
	}
	cur := realRoot
	for el := range strings.SplitSeq(filepath.Clean(ws), "/") {
		if el == "." || el == "" {
			continue
		}
		next := filepath.Join(cur, el)
		if _, err := os.Lstat(next); errors.Is(err, fs.ErrNotExist) {
			// cur is a checked real directory inside the root, so this
			// creates inside the root. ErrExist means someone else won.
			if err := os.Mkdir(next, workspaceDirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", internalErr("create workspace", err)
			}
		} else if err != nil {
			return "", internalErr("inspect workspace", err)
		}
		real, err := filepath.EvalSymlinks(next)
		if err != nil {
			// A dangling symlink: whatever it names, it is not a
			// directory we may use.
			return "", invalidRequest("workspace %q is not a usable directory", ws)
		}
		if !within(realRoot, real) {
			return "", invalidRequest("workspace %q escapes the workspace root", ws)
		}
		fi, err := os.Stat(real)
		if err != nil {
			return "", internalErr("inspect workspace", err)
		}
		if !fi.IsDir() {
			return "", invalidRequest("workspace %q is not a directory", ws)
		}
		cur = real
	}
	return cur, nil
}

// checkWorkspaceLexical rejects what can be rejected without touching the
// file system.
func checkWorkspaceLexical(ws string) error {
	if strings.IndexByte(ws, 0) >= 0 {
		return invalidRequest("workspace contains a NUL byte")
	}
	if filepath.IsAbs(ws) {
		return invalidRequest("workspace %q must be relative to the workspace root", ws)
	}
	for el := range strings.SplitSeq(ws, "/") {
		if el == ".." {
			return invalidRequest("workspace %q must not contain \"..\"", ws)
		}
	}
	return nil
}

// within reports whether path is root or below it. Both must be clean,
// absolute real paths.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel))
}

func invalidRequest(format string, args ...any) error {
	return &adapter.Error{Code: adapter.CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// internalErr reports a Node-local failure. The message stays generic: the
// cause (which may name Node paths) goes only to Err, for logs.
func internalErr(what string, err error) error {
	return &adapter.Error{Code: adapter.CodeInternal, Message: "cli: " + what + " failed", Err: err}
}
