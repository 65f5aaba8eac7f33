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
	reasons := constants(t, "Reason")
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

// operationsDoc lists every event reason in its table of events: a row "| `<reason>`, ... |".
var operationsDoc = filepath.Join("..", "..", "..", "docs", "operations.md")

// Every event reason troupe emits (an Event* constant of this package, its message formats
// aside) is a row of docs/operations.md's table of events.
func TestEveryEventReasonIsInOperations(t *testing.T) {
	events := constants(t, "Event")
	data, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if first, _, ok := strings.Cut(strings.TrimPrefix(line, "| "), " | "); ok && strings.HasPrefix(line, "| `") {
			for _, r := range strings.Split(first, ", ") {
				rows[strings.Trim(r, "`")] = true
			}
		}
	}
	if len(events) < 15 {
		t.Fatalf("found %d Event* constants, want every event reason: %v", len(events), events)
	}
	for _, name := range slices.Sorted(maps.Keys(events)) {
		if strings.HasSuffix(name, "Message") {
			continue
		}
		if !rows[events[name]] {
			t.Errorf("%s = %q is not a row of docs/operations.md's table of events: say when it is emitted", name, events[name])
		}
	}
}

// constants parses this package's Go files (tests and generated code aside) and returns every
// exported string constant whose name starts with prefix, by name. A constant may be another
// one of the same package (EventSecretMissing = ReasonSecretMissing).
func constants(t *testing.T, prefix string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	aliases := map[string]string{}
	all := map[string]string{}
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
					if !id.IsExported() || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						all[id.Name], _ = strconv.Unquote(lit.Value)
					}
					if !strings.HasPrefix(id.Name, prefix) {
						continue
					}
					if other, ok := vs.Values[i].(*ast.Ident); ok {
						aliases[id.Name] = other.Name
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
	for name, other := range aliases {
		v, ok := all[other]
		if !ok {
			t.Errorf("%s = %s: not a string constant of this package", name, other)
		}
		reasons[name] = v
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
