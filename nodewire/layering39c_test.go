package nodewire

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/iop-gateway/iop"

// The transport never builds an HTTP surface's answer (wire contract,
// prohibitions: surface conversion lives in the edge service/input
// layer): neither the node wire nor the dispatcher that serves its
// handlers imports, even indirectly through the module's own packages,
// the HTTP surfaces (gateway/...) or the HTTP framework they are built on.
func TestTransportImportsNoHTTPSurface(t *testing.T) {
	forbidden := []string{modulePath + "/gateway", "github.com/gin-gonic/gin"}
	seen := map[string]string{} // package -> the package that imported it
	queue := []string{modulePath + "/nodewire", modulePath + "/dispatch"}
	for _, p := range queue {
		seen[p] = ""
	}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, imp := range packageImports(t, pkg) {
			for _, f := range forbidden {
				if imp == f || strings.HasPrefix(imp, f+"/") {
					t.Errorf("%s imports %s (chain: %s)", pkg, imp, chain(seen, pkg))
				}
			}
			if _, ok := seen[imp]; ok || !strings.HasPrefix(imp, modulePath+"/") {
				continue
			}
			seen[imp] = pkg
			queue = append(queue, imp)
		}
	}
	if len(seen) < 4 {
		t.Fatalf("walked only %d packages: the walk is broken", len(seen))
	}
}

// packageImports lists the imports of pkg's non-test Go files (a package of
// this module, found under the module root beside this package).
func packageImports(t *testing.T, pkg string) []string {
	t.Helper()
	dir := filepath.Join("..", strings.TrimPrefix(pkg, modulePath))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%s: %v", pkg, err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range f.Imports {
			p, _ := strconv.Unquote(s.Path.Value)
			out = append(out, p)
		}
	}
	return out
}

func chain(seen map[string]string, pkg string) string {
	parts := []string{pkg}
	for p := seen[pkg]; p != ""; p = seen[p] {
		parts = append(parts, p)
	}
	return strings.Join(parts, " <- ")
}
