package frontend

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoRawPacketOffsets keeps the wire protocol in mysqlproto (issue 26
// item 1): the frontend works on typed commands and replies, so its
// non-test files neither import encoding/binary nor index a slice at a
// constant offset (pkt[1:], f[3], p[0]). The exception is a result-set
// row (res.Rows[0][0], or a variable taken from one), which is no packet.
func TestNoRawPacketOffsets(t *testing.T) {
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
		for _, bad := range rawOffsets(t, fset, name, src) {
			t.Errorf("%s: raw packet decoding; use a mysqlproto Parse/Append function", bad)
		}
	}
}

// TestRawOffsetsFinds: the check sees what it is meant to forbid.
func TestRawOffsetsFinds(t *testing.T) {
	src := `package x
import "encoding/binary"
func f(pkt []byte, res R) {
	_ = pkt[1:]
	_ = pkt[0]
	_ = binary.LittleEndian.Uint32(pkt[1:5])
	_ = pkt[:0]
	r := res.Rows[0]
	_ = r[2] + res.Rows[0][1]
}`
	got := rawOffsets(t, token.NewFileSet(), "x.go", []byte(src))
	if len(got) != 5 { // the import, pkt[1:], pkt[0], binary…, pkt[1:5]
		t.Errorf("found %d, want 5: %q", len(got), got)
	}
}

// rawOffsets lists the places in one file that decode packet bytes by
// hand.
func rawOffsets(t *testing.T, fset *token.FileSet, name string, src []byte) []string {
	t.Helper()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	at := func(n ast.Node, what string) {
		found = append(found, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), what))
	}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "encoding/binary" {
			at(imp, "imports encoding/binary")
		}
	}
	// Variables holding a result-set row.
	rows := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, rhs := range as.Rhs {
				if id, ok := as.Lhs[i].(*ast.Ident); ok && isResultRow(rhs, rows) {
					rows[id.Name] = true
				}
			}
		}
		return true
	})
	constant := func(e ast.Expr) bool {
		lit, ok := e.(*ast.BasicLit)
		return ok && lit.Kind == token.INT && lit.Value != "0"
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.IndexExpr:
			if lit, ok := x.Index.(*ast.BasicLit); ok && lit.Kind == token.INT && !isResultRow(x.X, rows) {
				at(x, "constant index")
			}
		case *ast.SliceExpr:
			if (constant(x.Low) || constant(x.High) || constant(x.Max)) && !isResultRow(x.X, rows) {
				at(x, "constant slice bound")
			}
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == "binary" {
				at(x, "encoding/binary")
			}
		}
		return true
	})
	return found
}

// isResultRow reports whether e is a query result's rows or a row of
// them: an expression through a Rows field, or a variable in rows.
func isResultRow(e ast.Expr, rows map[string]bool) bool {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return rows[x.Name]
		case *ast.SelectorExpr:
			if x.Sel.Name == "Rows" {
				return true
			}
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		default:
			return false
		}
	}
}
