package gateway

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoClientRangeErrorNumbers walks every ERR packet the gateway, the
// owner and the packages they use can build (each wire.NewError call and
// SQLError literal outside tests) and fails on a number between 2000 and
// 2999: client libraries keep those for themselves, and libmariadb turns
// one sent by a server into 2027 "Received malformed packet". A number
// that is not a constant (a backend's error passed on) is not checked.
func TestNoClientRangeErrorNumbers(t *testing.T) {
	fset := token.NewFileSet()
	// consts[package directory name][constant name] is the constant's
	// expression.
	consts := map[string]map[string]ast.Expr{}
	type site struct {
		pkg  string
		pos  token.Pos
		expr ast.Expr
	}
	var sites []site
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "e2e", "testdata", ".git", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		pkg := filepath.Base(filepath.Dir(path))
		if consts[pkg] == nil {
			consts[pkg] = map[string]ast.Expr{}
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						consts[pkg][name.Name] = vs.Values[i]
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if isNamed(n.Fun, "NewError") && len(n.Args) > 0 {
					sites = append(sites, site{pkg, n.Pos(), n.Args[0]})
				}
			case *ast.CompositeLit:
				if isNamed(n.Type, "SQLError") {
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok && isNamed(kv.Key, "Code") {
							sites = append(sites, site{pkg, n.Pos(), kv.Value})
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var eval func(pkg string, e ast.Expr, depth int) (int64, bool)
	eval = func(pkg string, e ast.Expr, depth int) (int64, bool) {
		if depth > 8 {
			return 0, false
		}
		switch e := e.(type) {
		case *ast.BasicLit:
			n, err := strconv.ParseInt(e.Value, 0, 64)
			return n, err == nil
		case *ast.ParenExpr:
			return eval(pkg, e.X, depth+1)
		case *ast.CallExpr: // a conversion such as uint16(1429)
			if len(e.Args) == 1 {
				return eval(pkg, e.Args[0], depth+1)
			}
		case *ast.Ident:
			if v, ok := consts[pkg][e.Name]; ok {
				return eval(pkg, v, depth+1)
			}
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok {
				if v, ok := consts[x.Name][e.Sel.Name]; ok {
					return eval(x.Name, v, depth+1)
				}
			}
		}
		return 0, false
	}
	checked := 0
	for _, s := range sites {
		n, ok := eval(s.pkg, s.expr, 0)
		if !ok {
			continue
		}
		checked++
		if n >= 2000 && n <= 2999 {
			t.Errorf("%s: the error number %d is in the client range (2000-2999)", fset.Position(s.pos), n)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d error numbers found: the walk is broken", checked)
	}
	t.Logf("%d error numbers checked at %d sites", checked, len(sites))
}

// isNamed reports whether e is the identifier name or a selector ending
// in it (wire.NewError).
func isNamed(e ast.Expr, name string) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == name
	case *ast.SelectorExpr:
		return e.Sel.Name == name
	case *ast.StarExpr:
		return isNamed(e.X, name)
	}
	return false
}
