// Command filerefs counts how the files of one Go package reference each other: a reference
// from file A to file B is a name A uses (a function, type, method, field, variable or
// constant) that B declares. It prints the files, the distinct A -> B pairs, and the groups of
// files that reference each other in a cycle (strongly connected components), largest first.
// Test files are left out. With -v it lists every pair with the names it uses. With -order
// FILE it also counts the pairs against an order of the files: the order in which FILE (a
// Markdown document) first names each of them in a table row ("| `name.go` | ..."), lowest
// first; a reference from a file to one listed below it goes against the order.
//
// With -check it fails when the files reference each other in a cycle or, with -order, when a
// pair goes against the order (make verify checks pkg/engine against docs/architecture.md).
//
//	go run ./hack/filerefs [-v] [-check] [-order docs/architecture.md] ./pkg/engine
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
}

func main() {
	verbose := flag.Bool("v", false, "list each file -> file pair with the names it uses")
	orderDoc := flag.String("order", "", "a Markdown file whose table rows list the package's files, lowest first")
	check := flag.Bool("check", false, "fail on a cycle, or on a pair against the order")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: filerefs [-v] [-order FILE] PACKAGE")
		os.Exit(2)
	}
	var order []string
	if *orderDoc != "" {
		doc, err := os.ReadFile(*orderDoc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "filerefs:", err)
			os.Exit(1)
		}
		if order = tableOrder(string(doc)); len(order) == 0 {
			fmt.Fprintf(os.Stderr, "filerefs: %s lists no Go file in a table row\n", *orderDoc)
			os.Exit(1)
		}
	}
	if err := run(flag.Arg(0), *verbose, *check, order, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "filerefs:", err)
		os.Exit(1)
	}
}

func run(pattern string, verbose, check bool, order []string, out io.Writer) error {
	// The export data of every dependency, as the compiler wrote it, to type-check the package.
	cmd := exec.Command("go", "list", "-export", "-deps", "-json", pattern)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list: %w", err)
	}
	exports := map[string]string{}
	var target listed
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return err
		}
		exports[p.ImportPath] = p.Export
		target = p // -deps lists the named package last
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range target.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(target.Dir, name), nil, 0)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if e := exports[path]; e != "" {
			return os.Open(e)
		}
		return nil, fmt.Errorf("no export data for %s", path)
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	pkg, err := (&types.Config{Importer: imp}).Check(target.ImportPath, fset, files, info)
	if err != nil {
		return err
	}
	edges := map[[2]string]int{}
	names := map[[2]string]map[string]bool{}
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		if v, ok := obj.(*types.Var); ok && !v.IsField() && obj.Parent() != pkg.Scope() {
			continue // a local variable or parameter
		}
		if _, ok := obj.(*types.Label); ok {
			continue
		}
		if obj.Parent() != nil && obj.Parent() != pkg.Scope() && !isMember(obj) {
			continue // declared inside a function
		}
		from, to := filepath.Base(fset.Position(id.Pos()).Filename), filepath.Base(fset.Position(obj.Pos()).Filename)
		if from != to {
			edges[[2]string{from, to}]++
			if names[[2]string{from, to}] == nil {
				names[[2]string{from, to}] = map[string]bool{}
			}
			names[[2]string{from, to}][obj.Name()] = true
		}
	}
	fileNames := slices.Clone(target.GoFiles)
	slices.Sort(fileNames)
	_, _ = fmt.Fprintf(out, "%s: %d files, %d file -> file pairs (%d uses across files)\n", target.ImportPath, len(fileNames), len(edges), sum(edges))
	if verbose {
		pairs := slices.Collect(maps.Keys(edges))
		slices.SortFunc(pairs, func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
		for _, e := range pairs {
			_, _ = fmt.Fprintf(out, "  %s -> %s: %s\n", e[0], e[1], strings.Join(slices.Sorted(maps.Keys(names[e])), " "))
		}
	}
	cycles := 0
	for _, c := range components(fileNames, edges) {
		if len(c) > 1 {
			cycles++
			_, _ = fmt.Fprintf(out, "cycle of %d files: %s\n", len(c), strings.Join(c, " "))
		}
	}
	against := 0
	if order != nil {
		if against, err = printAgainstOrder(out, fileNames, order, edges, names); err != nil {
			return err
		}
	}
	if check && (cycles > 0 || against > 0) {
		return fmt.Errorf("%s: %d cycles, %d pairs against the order: move the names so that each file uses only the files above it", target.ImportPath, cycles, against)
	}
	return nil
}

// tableOrder lists the Go files a Markdown document names first in a table row, in the order
// it names them.
func tableOrder(doc string) []string {
	var order []string
	for _, m := range tableRowFile.FindAllStringSubmatch(doc, -1) {
		if !slices.Contains(order, m[1]) {
			order = append(order, m[1])
		}
	}
	return order
}

var tableRowFile = regexp.MustCompile("(?m)^\\| `([A-Za-z0-9_]+\\.go)` \\|")

// printAgainstOrder prints the pairs that go from a file to one listed below it and returns
// their count; a file the order leaves out is an error (the order must name every file).
func printAgainstOrder(out io.Writer, files, order []string, edges map[[2]string]int, names map[[2]string]map[string]bool) (int, error) {
	rank := map[string]int{}
	for i, f := range order {
		rank[f] = i
	}
	var missing []string
	for _, f := range files {
		if _, ok := rank[f]; !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return 0, fmt.Errorf("the order does not list %s", strings.Join(missing, ", "))
	}
	var against [][2]string
	for e := range edges {
		if rank[e[0]] < rank[e[1]] {
			against = append(against, e)
		}
	}
	slices.SortFunc(against, func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
	_, _ = fmt.Fprintf(out, "%d of %d pairs go against the order\n", len(against), len(edges))
	for _, e := range against {
		_, _ = fmt.Fprintf(out, "  %s -> %s: %s\n", e[0], e[1], strings.Join(slices.Sorted(maps.Keys(names[e])), " "))
	}
	return len(against), nil
}

// isMember reports whether obj is a method or a struct field (declared in a type, not in a
// function body).
func isMember(obj types.Object) bool {
	switch o := obj.(type) {
	case *types.Func:
		return o.Type().(*types.Signature).Recv() != nil
	case *types.Var:
		return o.IsField()
	}
	return false
}

func sum(m map[[2]string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// components are the strongly connected components of the file graph (Tarjan), largest first.
func components(nodes []string, edges map[[2]string]int) [][]string {
	adj := map[string][]string{}
	for e := range edges {
		adj[e[0]] = append(adj[e[0]], e[1])
	}
	index, low, onStack := map[string]int{}, map[string]int{}, map[string]bool{}
	var stack []string
	var out [][]string
	next := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range adj[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var c []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				c = append(c, w)
				if w == v {
					break
				}
			}
			slices.Sort(c)
			out = append(out, c)
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	slices.SortStableFunc(out, func(a, b []string) int { return len(b) - len(a) })
	return out
}
