// Command docrefs checks that what the documentation cites exists in the repository, as a link
// checker does for links:
//
//	go run ./hack/docrefs
//
// In README.md, docs/*.md, charts/troupe/README.md and every other README of the repository's
// folders, it checks
//   - relative Markdown links: the file exists, and an #anchor is a heading of it;
//   - repository paths in `code` (a first segment that is a top-level folder or file of the
//     repository): the path exists (a glob matches);
//   - `make TARGET` in code and in code blocks: the Makefile has the target;
//   - test, fuzz and benchmark names (TestX, FuzzX, BenchmarkX): a _test.go declares them;
//   - `--flags` in code: one of troupe's commands declares it (cmd/), or it is one of the other
//     programs' flags the documents use (externalFlags).
//
// CHANGELOG.md is left out: it tells what was, and may name what is gone. make verify runs it.
package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// externalFlags are flags of other programs that the documents cite (kubectl, helm, mpirun,
// kwokctl, kube-scheduler, Volcano's scheduler, horovodrun, buildah, docker, curl, ...), and
// controller-runtime's logging flags that troupe-operator takes from it.
var externalFlags = setOf(
	// controller-runtime's zap options (troupe-operator's logging flags).
	"zap-log-level", "zap-encoder", "zap-devel", "zap-stacktrace-level", "zap-time-encoding",
	// kubectl and helm.
	"server-side", "force-conflicts", "dry-run", "namespace", "context", "kubeconfig", "as", "as-group",
	"wait", "tail", "set", "create-namespace", "request-timeout", "field-manager", "cascade", "for",
	"timeout", "selector", "all-namespaces", "output", "values", "version", "replicas", "type",
	"from-file", "from-literal", "overwrite", "ignore-not-found", "show-managed-fields", "prune",
	"follow", "container", "previous", "since", "watch", "kustomize", "raw", "subresource", "flatten", "minify",
	"patch", "validate", "server", "token", "insecure-skip-tls-verify", "help", "disable-eviction",
	// mpirun, horovodrun, ssh and the MPI launchers' arguments.
	"hostfile", "mca", "prefix", "bind-to", "map-by", "np", "allow-run-as-root", "tag-output",
	"enable-recovery", "max-restarts", "oversubscribe", "launcher", "launch-agent", "host",
	"output-filename", "report-bindings", "display-map", "x",
	// the local cluster's components and tools (kwokctl, kube-scheduler, controller manager,
	// Volcano, scheduler-plugins), buildah, containers and Go's tools.
	"runtime", "disable-qps-limits", "manage-all-nodes", "pod-max-in-unschedulable-pods-duration",
	"concurrent-job-syncs", "kube-api-qps", "kube-api-burst", "leader-elect", "network", "ulimit",
	"tee", "redirects", "controller-queue-rate-limit", "controller-queue-burst", "threadiness",
	"build-arg", "target", "file", "tag", "platform", "count", "run", "fuzz", "fuzztime", "bench",
	"benchtime", "cpuprofile", "memprofile", "trimpath", "ldflags", "mod", "checkpoint-dir",
	"bcast-bytes", "ssh-identity-file", "all", "host-discovery-script", "daemonize", "clusterrole", "role",
	"manage-nodes-with-annotation-selector", "cleanup", "force", "mount", "check", "ignore-missing",
	"node-monitor-grace-period", "manage-nodes-with-label-selector",
	// metrics-server (the local cluster's add-on metrics), and kwokctl's flags that run it.
	"kubelet-insecure-tls", "kubelet-use-node-status-port", "kubelet-preferred-address-types",
	"metric-resolution", "enable", "metrics-server-binary",
)

func setOf(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

var (
	codeSpan   = regexp.MustCompile("`([^`\n]+)`")
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	makeTarget = regexp.MustCompile(`(?:^|[\s;&|(])make ([a-z][a-z0-9-]*)`)
	testName   = regexp.MustCompile(`\b((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)`)
	flagName   = regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*)$`)
	makeRule   = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9_-]*(?:\s+[a-zA-Z][a-zA-Z0-9_-]*)*):`)
	declared   = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`)
	// scriptFlag is a flag one of troupe's scripts takes (a case pattern "--push)" or a
	// test ("== --push"), or a training program of its images declares (add_argument("--x")).
	scriptFlag = regexp.MustCompile(`(?m)(?:^\s*--([a-z][a-z0-9-]*)[|)]|== --([a-z][a-z0-9-]*)|add_argument\("--([a-z][a-z0-9-]*)")`)
	cmdFlag    = regexp.MustCompile(`(?:flag|fs|flags|f)\.(?:String|Bool|Int|Int64|Float64|Duration|Uint|Var|StringVar|BoolVar|IntVar|Int64Var|Float64Var|DurationVar|UintVar|StringSlice|StringSliceVar|StringArrayVar|StringToStringVar|IntP|StringP|BoolP|StringVarP|BoolVarP|IntVarP|DurationVarP|DurationP)\((?:&?[A-Za-z0-9_.]+,\s*)?"([a-z0-9-]+)"`)
)

type checker struct {
	root     string
	topLevel map[string]bool
	targets  map[string]bool
	tests    map[string]bool
	flags    map[string]bool
	problems []string
	headings map[string]map[string]bool
}

func main() {
	c := &checker{root: ".", headings: map[string]map[string]bool{}}
	if err := c.load(); err != nil {
		fmt.Fprintln(os.Stderr, "docrefs:", err)
		os.Exit(2)
	}
	docs, err := c.documents()
	if err != nil {
		fmt.Fprintln(os.Stderr, "docrefs:", err)
		os.Exit(2)
	}
	for _, d := range docs {
		if err := c.check(d); err != nil {
			fmt.Fprintln(os.Stderr, "docrefs:", err)
			os.Exit(2)
		}
	}
	for _, p := range c.problems {
		fmt.Println(p)
	}
	if len(c.problems) > 0 {
		fmt.Printf("docrefs: %d reference(s) to nothing in %d documents\n", len(c.problems), len(docs))
		os.Exit(1)
	}
}

// documents are the Markdown files checked.
func (c *checker) documents() ([]string, error) {
	var docs []string
	err := filepath.WalkDir(c.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "dist" || d.Name() == "testdata" ||
			path == filepath.Join("test", "manifests")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") && path != "CHANGELOG.md" {
			docs = append(docs, path)
		}
		return nil
	})
	return docs, err
}

// load reads what references may name: the top-level entries, make targets, test names and flags.
func (c *checker) load() error {
	entries, err := os.ReadDir(c.root)
	if err != nil {
		return err
	}
	c.topLevel = map[string]bool{}
	for _, e := range entries {
		c.topLevel[e.Name()] = true
	}
	c.targets = map[string]bool{}
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(mk), "\n") {
		if m := makeRule.FindStringSubmatch(line); m != nil && !strings.Contains(line, ":=") {
			for _, t := range strings.Fields(m[1]) {
				c.targets[t] = true
			}
		}
	}
	c.tests, c.flags = map[string]bool{}, map[string]bool{}
	return filepath.WalkDir(c.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		if strings.HasSuffix(path, ".sh") || strings.HasSuffix(path, ".py") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range scriptFlag.FindAllStringSubmatch(string(src), -1) {
				c.flags[m[1]+m[2]+m[3]] = true
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, "_test.go") {
			for _, m := range declared.FindAllStringSubmatch(string(src), -1) {
				c.tests[m[1]] = true
			}
		}
		if strings.HasPrefix(path, "cmd"+string(filepath.Separator)) || strings.HasPrefix(path, "test"+string(filepath.Separator)) {
			for _, m := range cmdFlag.FindAllStringSubmatch(string(src), -1) {
				c.flags[m[1]] = true
			}
		}
		return nil
	})
}

func (c *checker) problem(doc string, line int, format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf("%s:%d: %s", doc, line, fmt.Sprintf(format, args...)))
}

// check reads one document line by line: prose (code spans, links) and code blocks.
func (c *checker) check(doc string) error {
	f, err := os.Open(doc)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	inBlock, n := false, 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			if m := makeTarget.FindStringSubmatch(strings.TrimSpace(line)); m != nil && strings.HasPrefix(strings.TrimSpace(line), "make ") {
				c.checkTarget(doc, n, m[1])
			}
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			c.checkLink(doc, n, m[1])
		}
		for _, m := range testName.FindAllStringSubmatch(line, -1) {
			if !c.tests[m[1]] {
				c.problem(doc, n, "%s: no _test.go declares it", m[1])
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			c.checkCode(doc, n, line, m[1])
		}
	}
	return sc.Err()
}

func (c *checker) checkTarget(doc string, n int, target string) {
	if !c.targets[target] {
		c.problem(doc, n, "make %s: the Makefile has no such target", target)
	}
}

// checkCode checks one code span: a make target, flags, a repository path.
func (c *checker) checkCode(doc string, n int, line, code string) {
	// Another project's target ("FFFFFaraway's `make deploy`") is not ours.
	if strings.HasPrefix(code, "make ") && !strings.Contains(line, "'s `"+code+"`") {
		if m := makeTarget.FindStringSubmatch(code); m != nil {
			c.checkTarget(doc, n, m[1])
		}
	}
	for _, m := range flagName.FindAllStringSubmatch(code, -1) {
		if !c.flags[m[1]] && !externalFlags[m[1]] {
			c.problem(doc, n, "--%s: no command of troupe declares it (cmd/), nor is it a flag the docs know of another program (hack/docrefs)", m[1])
		}
	}
	// Placeholders and elisions (<kind>, X.Y.Z, apis/.../x) and the hypothetical kind FooJob
	// that docs/architecture.md adds are no paths to check.
	if strings.ContainsAny(code, " <>{}$=:") || strings.Contains(code, "X.Y.Z") || strings.Contains(code, "...") ||
		strings.Contains(strings.ToLower(code), "foojob") {
		return
	}
	path := strings.TrimSuffix(strings.TrimPrefix(code, "./"), "/")
	first, _, _ := strings.Cut(path, "/")
	// bin, dist and bench-results hold what a build or a bench run made on one machine, never
	// in a clone: a doc names a bench's results folder as where its figures came from.
	if !strings.Contains(path, "/") || !c.topLevel[first] || first == "bin" || first == "dist" || first == "bench-results" {
		return
	}
	path, _, _ = strings.Cut(path, "#")
	// A Go name in a package (pkg/testing.StartOperator): the package's folder.
	if dir, name, ok := strings.Cut(filepath.Base(path), "."); ok && name != "" && name[0] >= 'A' && name[0] <= 'Z' {
		path = filepath.Join(filepath.Dir(path), dir)
	}
	c.checkPath(doc, n, path)
}

func (c *checker) checkPath(doc string, n int, path string) {
	if strings.Contains(path, "*") {
		if m, _ := filepath.Glob(path); len(m) == 0 {
			c.problem(doc, n, "%s: matches no file", path)
		}
		return
	}
	if _, err := os.Stat(path); err != nil {
		c.problem(doc, n, "%s: no such file or folder", path)
	}
}

// checkLink checks a relative Markdown link and its anchor.
func (c *checker) checkLink(doc string, n int, target string) {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return
	}
	file, anchor, _ := strings.Cut(target, "#")
	path := doc
	if file != "" {
		path = filepath.Join(filepath.Dir(doc), file)
		if _, err := os.Stat(path); err != nil {
			c.problem(doc, n, "link %s: no such file", target)
			return
		}
	}
	if anchor == "" || !strings.HasSuffix(path, ".md") {
		return
	}
	if !c.anchors(path)[anchor] {
		c.problem(doc, n, "link %s: %s has no heading with the anchor #%s", target, path, anchor)
	}
}

// anchors are the GitHub anchors of a document's headings.
func (c *checker) anchors(path string) map[string]bool {
	if a, ok := c.headings[path]; ok {
		return a
	}
	a := map[string]bool{}
	c.headings[path] = a
	data, err := os.ReadFile(path)
	if err != nil {
		return a
	}
	inBlock := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
		}
		if m := heading.FindStringSubmatch(line); m != nil && !inBlock {
			slug := anchor(m[1])
			for i := 0; a[slug]; i++ {
				slug = fmt.Sprintf("%s-%d", anchor(m[1]), i+1)
			}
			a[slug] = true
		}
	}
	return a
}

// anchor is GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes.
func anchor(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
