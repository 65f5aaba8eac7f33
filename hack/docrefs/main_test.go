package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A document that cites a missing make target, path, test, flag or anchor gets one problem
// each; what exists passes.
func TestCheckFindsWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Makefile", "test: ## tests\n\tgo test ./...\nA := b\n")
	write("cmd/op/main.go", "package main\nfunc main() { flag.Bool(\"leader-elect\", false, \"\") }\n")
	write("cmd/op/main_test.go", "package main\nfunc TestReal(t *testing.T) {}\n")
	write("docs/a.md", strings.Join([]string{
		"# A heading",
		"`make test`, `make nothing`, `cmd/op/main.go`, `cmd/gone.go`, TestReal, TestGone,",
		"`--leader-elect`, `--no-such-flag`, [ok](b.md#second-part), [bad](b.md#nowhere), [gone](c.md).",
		"```sh",
		"make test",
		"make absent",
		"```",
	}, "\n"))
	write("docs/b.md", "# B\n## Second part\n")
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chdir(wd) })
	c := &checker{root: ".", headings: map[string]map[string]bool{}}
	if err := c.load(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"docs/a.md", "docs/b.md"} {
		if err := c.check(d); err != nil {
			t.Fatal(err)
		}
	}
	got := strings.Join(c.problems, "\n")
	for _, want := range []string{"make nothing", "cmd/gone.go", "TestGone", "--no-such-flag", "#nowhere", "c.md", "make absent"} {
		if !strings.Contains(got, want) {
			t.Errorf("no problem names %q; problems:\n%s", want, got)
		}
	}
	if len(c.problems) != 7 {
		t.Errorf("%d problems, want 7:\n%s", len(c.problems), got)
	}
}
