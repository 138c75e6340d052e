package cluster

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Every script of the package is made by newScript, which records its
// body: no script can be sent by hash (EVALSHA) without evalAgain knowing
// the body to send after NOSCRIPT. The package's files (tests aside) call
// redis.NewScript only inside newScript; the old code called it for each
// script and listed the bodies by hand (take's was missing).
func TestScriptsAreMadeByNewScriptOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var seen int
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, isFunc := decl.(*ast.FuncDecl)
			ast.Inspect(decl, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "NewScript" {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "redis" {
					seen++
					if !isFunc || fn.Recv != nil || fn.Name.Name != "newScript" {
						t.Errorf("%s: redis.NewScript outside newScript: its body would be unknown to evalAgain", fset.Position(call.Pos()))
					}
				}
				return true
			})
		}
	}
	if seen == 0 {
		t.Fatal("no redis.NewScript found at all: the check reads the wrong files")
	}
}

// Every Lua file of the package is known by its SHA1 with its exact body
// (what EVALSHA names and what EVAL sends after NOSCRIPT), and each script
// variable names its own file.
func TestEveryScriptFileIsKnownByItsHash(t *testing.T) {
	files, err := filepath.Glob("*.lua")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Lua file found")
	}
	for _, name := range files {
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha1.Sum(body)
		if got, ok := scriptBodies[hex.EncodeToString(sum[:])]; !ok || got != string(body) {
			t.Errorf("%s (sha1 %x) has no body in scriptBodies", name, sum)
		}
	}
	for name, s := range map[string]*redis.Script{"take.lua": takeScript, "renew.lua": renewScript, "wait.lua": waitScript, "readd.lua": readdScript, "return.lua": returnScript, "pending.lua": pendingScript} {
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if scriptBodies[s.Hash()] != string(body) {
			t.Errorf("the script of %s does not send its body", name)
		}
	}
	if len(scriptBodies) != len(files) {
		t.Errorf("%d script bodies for %d Lua files", len(scriptBodies), len(files))
	}
}

// A script whose body evalAgain does not know (made around newScript) is
// not sent as an EVAL of an empty body, which Redis runs as a script doing
// nothing and answers nil (the update silently not made, the batch taken
// as applied): its NOSCRIPT stands as the refusal it is, and nothing is
// sent again.
func TestAScriptWithoutItsBodyIsNotSentEmpty(t *testing.T) {
	_, l, rdb := ledgerOnRedis(t)
	ctx := context.Background()
	stray := redis.NewScript("return redis.call('SET', KEYS[1], 'ran')")
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	evals, _ := evalCalls(t, rdb)
	pipe := l.rdb.Pipeline()
	stray.EvalSha(ctx, pipe, []string{"stray"})
	cmds, _ := pipe.Exec(ctx)
	err := evalAgain(ctx, l.rdb, cmds)
	if !noScript(err) || failureClass(err) != ErrRefused {
		t.Fatalf("resend of a script with no known body: %v; want its NOSCRIPT refusal", err)
	}
	if after, _ := evalCalls(t, rdb); after != evals {
		t.Fatalf("EVAL sent for a script with no known body (%d calls, %d before)", after, evals)
	}
}
