package v1alpha1

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// troubleshootingDoc is the page users read when a job says a reason; it has one heading per
// reason: a line "### `<reason>`".
var troubleshootingDoc = filepath.Join("..", "..", "..", "docs", "troubleshooting.md")

// Every condition reason troupe writes (a Reason* constant of this package) is explained in
// docs/troubleshooting.md under a heading of its own, so that a new reason without its
// documentation fails make test-unit.
func TestEveryReasonIsInTroubleshooting(t *testing.T) {
	reasons := reasonConstants(t)
	if len(reasons) < 40 {
		t.Fatalf("found %d Reason* constants in this package, want every condition reason (more than 40): %v", len(reasons), reasons)
	}
	headings := reasonHeadings(t)
	names := slices.Sorted(maps.Keys(reasons))
	for _, name := range names {
		if value := reasons[name]; !headings[value] {
			t.Errorf("%s = %q has no heading \"### `%s`\" in docs/troubleshooting.md: say which condition carries it, what it means and what to do", name, value, value)
		}
	}
}

// reasonConstants parses this package's Go files (tests and generated code aside) and returns
// every exported string constant whose name starts with Reason, by name.
func reasonConstants(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "zz_generated") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !id.IsExported() || !strings.HasPrefix(id.Name, "Reason") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						// A reason must be a string written here, so this test sees its value.
						t.Errorf("%s: %s is not a string literal", fset.Position(id.Pos()), id.Name)
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatalf("%s: %v", fset.Position(lit.Pos()), err)
					}
					reasons[id.Name] = v
				}
			}
		}
	}
	return reasons
}

// reasonHeadings returns the reasons docs/troubleshooting.md has a heading "### `<reason>`" for.
func reasonHeadings(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(troubleshootingDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	headings := map[string]bool{}
	var dup []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if !strings.HasPrefix(line, "### `") || !strings.HasSuffix(line, "`") {
			continue
		}
		r := strings.TrimSuffix(strings.TrimPrefix(line, "### `"), "`")
		if headings[r] {
			dup = append(dup, r)
		}
		headings[r] = true
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(dup) > 0 {
		slices.Sort(dup)
		t.Errorf("docs/troubleshooting.md has more than one heading for %v: one per reason", dup)
	}
	return headings
}
