package executor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wallClock is what reads or waits on the wall clock in package time.
var wallClock = map[string]bool{"Now": true, "Since": true, "Until": true, "After": true, "AfterFunc": true,
	"NewTimer": true, "NewTicker": true, "Tick": true, "Sleep": true}

// wallClockAllowed: the functions that may, and why.
var wallClockAllowed = map[string]string{
	"realClock.Now":   "the clock itself",
	"realClock.After": "the clock itself",
	// The drain of a switchover by another instance moves to the
	// routing owner; until then it waits on real time.
	"ApplyShared": "another instance's switchover (routing owner)",
	"sleep":       "ApplyShared's wait",
}

// TestExecutorReadsOnlyItsClock: the executor reads and waits on time
// only through its Clock, so the scenario tests' fake clock is the whole
// of its time (statement timeouts bound real sockets and are not time
// the executor reads).
func TestExecutorReadsOnlyItsClock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn := ""
			if fd, ok := d.(*ast.FuncDecl); ok {
				fn = fd.Name.Name
				if fd.Recv != nil {
					rt := fd.Recv.List[0].Type
					if s, ok := rt.(*ast.StarExpr); ok {
						rt = s.X
					}
					if id, ok := rt.(*ast.Ident); ok && id.Name != "Executor" {
						fn = id.Name + "." + fn
					}
				}
			}
			ast.Inspect(d, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && wallClock[sel.Sel.Name] {
					if _, ok := wallClockAllowed[fn]; !ok {
						t.Errorf("%s: time.%s in %s: use the executor's Clock", fset.Position(sel.Pos()), sel.Sel.Name, orNone(fn))
					}
				}
				return true
			})
		}
	}
}
