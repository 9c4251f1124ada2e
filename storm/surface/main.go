// Command surface measures what a reader of the library meets: the names
// each package exports (as go doc lists them, methods included) and the
// longest functions, in Go and in the Lua scripts. It is the yardstick of
// the API redesign (issue 24): run it before and after a change.
//
//	go run ./storm/surface                # pacer (the lease's home), and the 10 longest functions
//	go run ./storm/surface -top 20 ./pacerhttp
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	top := flag.Int("top", 10, "how many of the longest functions to list")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"./pacer"}
	}
	total := 0
	for _, d := range dirs {
		n, err := exported(d)
		if err != nil {
			fmt.Fprintln(os.Stderr, "surface:", err)
			os.Exit(1)
		}
		fmt.Printf("%-12s %4d exported names (types, funcs, methods, consts, vars)\n", d, n)
		total += n
	}
	fmt.Printf("%-12s %4d\n\n", "together", total)
	fns, err := longest(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "surface:", err)
		os.Exit(1)
	}
	fmt.Printf("longest functions outside tests and storm/:\n")
	for i, f := range fns {
		if i == *top {
			break
		}
		fmt.Printf("%5d  %s\n", f.lines, f.name)
	}
}

// exported counts what go doc lists for the package in dir.
func exported(dir string) (int, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pkgs {
		d := doc.New(p, dir, 0)
		n += len(d.Funcs) + countValues(d.Consts) + countValues(d.Vars)
		for _, t := range d.Types {
			n += 1 + len(t.Funcs) + len(t.Methods) + countValues(t.Consts) + countValues(t.Vars)
		}
	}
	return n, nil
}

func countValues(vs []*doc.Value) int {
	n := 0
	for _, v := range vs {
		n += len(v.Names)
	}
	return n
}

type fn struct {
	name  string
	lines int
}

// longest lists the functions of every .go (outside tests and storm/) and
// .lua file under root, longest first. A Lua function is a line that
// starts a function and the matching end at the same indentation; a
// script's main block is counted as one function.
func longest(root string) ([]fn, error) {
	var out []fn
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "storm" || name == ".git" || name == "testdata" || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, "_test.go"):
		case strings.HasSuffix(path, ".go"):
			fs, err := goFuncs(path)
			out = append(out, fs...)
			return err
		case strings.HasSuffix(path, ".lua"):
			fs, err := luaFuncs(path)
			out = append(out, fs...)
			return err
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].lines > out[j].lines })
	return out, err
}

func goFuncs(path string) ([]fn, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, err
	}
	var out []fn
	ast.Inspect(f, func(n ast.Node) bool {
		var name string
		var body *ast.BlockStmt
		switch x := n.(type) {
		case *ast.FuncDecl:
			name, body = x.Name.Name, x.Body
			if x.Recv != nil && len(x.Recv.List) > 0 {
				name = recvName(x.Recv.List[0].Type) + "." + name
			}
		case *ast.FuncLit:
			return true
		}
		if body != nil {
			lines := fset.Position(body.Rbrace).Line - fset.Position(n.Pos()).Line + 1
			out = append(out, fn{path + ":" + name, lines})
		}
		return true
	})
	return out, nil
}

func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}

// luaFuncs finds 'local function name' / 'name = function' lines and the
// 'end' at the same indentation; the script's top level, less its
// functions, counts as 'main'.
func luaFuncs(path string) ([]fn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	var out []fn
	inFunc := make([]bool, len(lines))
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		if !strings.HasPrefix(t, "local function ") && !strings.Contains(t, "= function(") && !strings.HasPrefix(t, "function ") {
			continue
		}
		indent := l[:len(l)-len(t)]
		for j := i + 1; j < len(lines); j++ {
			if lines[j] == indent+"end" || strings.HasPrefix(lines[j], indent+"end ") || strings.HasPrefix(lines[j], indent+"end)") {
				name := strings.TrimSpace(strings.SplitN(strings.TrimPrefix(strings.TrimPrefix(t, "local "), "function "), "(", 2)[0])
				out = append(out, fn{path + ":" + name, j - i + 1})
				if indent == "" {
					for k := i; k <= j; k++ {
						inFunc[k] = true
					}
				}
				break
			}
		}
	}
	main := 0
	for i, l := range lines {
		if !inFunc[i] && strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "--") {
			main++
		}
	}
	out = append(out, fn{path + ":main (code lines)", main})
	return out, nil
}
