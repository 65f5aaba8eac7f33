// Command seedmanifests copies the job manifests of the published documents of the systems
// troupe replaces (the seeds: chainer-operator's README, T9k's MPIJob guide, FFFFFaraway's
// MPI-Operator README) into test data, so that the tests run them from the repository alone:
//
//	go run ./hack/seedmanifests SEEDS_DIR test/manifests/seeds
//
// Each ```yaml block of a document (each document of a block split at "---") that has a spec is
// one file, <document>/block<N>.<M>.yaml, written as the document has it. A fragment (a block that
// elides part of it with "..." lines, or whose containers have no name or image) is completed
// from the document's first whole example: maps merge key by key, lists element by element, the
// fragment's values win; its file says so in a comment. The apiVersion stays the seed's: the
// tests change it, as a user moving to troupe does.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

var (
	yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")
	// elision is a line a document writes as "..." for what it leaves out, alone or as a list
	// item ("- ..." followed by the item's other fields); it is removed, keeping the "-".
	elision       = regexp.MustCompile(`(?m)^(\s*-?)\s*\.\.\.\s*$`)
	documentBreak = regexp.MustCompile(`(?m)^---\s*$`)
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: seedmanifests SEEDS_DIR OUT_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "seedmanifests:", err)
		os.Exit(1)
	}
}

func run(seeds, out string) error {
	docs, err := filepath.Glob(filepath.Join(seeds, "*.md"))
	if err != nil {
		return err
	}
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			return err
		}
		examples, err := extract(string(data))
		if err != nil {
			return fmt.Errorf("%s: %w", doc, err)
		}
		if len(examples) == 0 {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(doc), ".md")
		dir := filepath.Join(out, name)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, ex := range examples {
			body, err := yaml.Marshal(ex.obj)
			if err != nil {
				return err
			}
			header := fmt.Sprintf("# %s, %s: as published.\n", filepath.Base(doc), ex.block)
			if ex.completedFrom != "" {
				header = fmt.Sprintf("# %s, %s: a fragment as published, completed from %s (hack/seedmanifests).\n",
					filepath.Base(doc), ex.block, ex.completedFrom)
			}
			if err := os.WriteFile(filepath.Join(dir, ex.block+".yaml"), append([]byte(header), body...), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// example is one job manifest of a document.
type example struct {
	block         string // block<N>.<M>: the Nth yaml block, its Mth document
	obj           map[string]any
	completedFrom string // the whole example a fragment was completed from, or ""
}

// extract returns the job manifests of a document, fragments completed. Blocks without a spec
// (the status a document shows as command output) and terminal transcripts are left out.
func extract(doc string) ([]example, error) {
	var out []example
	var fragments []int
	base := -1
	for i, block := range yamlBlock.FindAllStringSubmatch(doc, -1) {
		if strings.HasPrefix(block[1], "$ ") {
			continue
		}
		for j, part := range documentBreak.Split(block[1], -1) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(elision.ReplaceAllString(part, "$1")), &obj); err != nil {
				return nil, fmt.Errorf("block %d: %w", i+1, err)
			}
			if obj["spec"] == nil {
				continue
			}
			out = append(out, example{block: fmt.Sprintf("block%d.%d", i+1, j+1), obj: obj})
			if elision.MatchString(part) || obj["kind"] == nil || !namedContainers(obj["spec"]) {
				fragments = append(fragments, len(out)-1)
			} else if base < 0 {
				base = len(out) - 1
			}
		}
	}
	if len(fragments) > 0 && base < 0 {
		return nil, fmt.Errorf("fragments but no whole example to complete them from")
	}
	for _, f := range fragments {
		out[f].obj = complete(out[base].obj, out[f].obj).(map[string]any)
		out[f].completedFrom = out[base].block
	}
	return out, nil
}

// namedContainers reports whether every container list under v names its containers and their
// images, as a whole pod template does.
func namedContainers(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		if cs, ok := x["containers"].([]any); ok {
			for _, c := range cs {
				m, _ := c.(map[string]any)
				if m["name"] == nil || m["image"] == nil {
					return false
				}
			}
		}
		for _, e := range x {
			if !namedContainers(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !namedContainers(e) {
				return false
			}
		}
	}
	return true
}

// complete lays a fragment over a whole example: maps merge key by key, lists element by element
// (a fragment's first container completes the example's first), and the fragment's values win.
func complete(base, fragment any) any {
	switch f := fragment.(type) {
	case map[string]any:
		b, ok := base.(map[string]any)
		if !ok {
			return f
		}
		out := map[string]any{}
		for k, v := range b {
			out[k] = v
		}
		for k, v := range f {
			out[k] = complete(b[k], v)
		}
		return out
	case []any:
		b, _ := base.([]any)
		out := make([]any, max(len(b), len(f)))
		copy(out, b)
		for i, v := range f {
			out[i] = complete(out[i], v)
		}
		return out
	}
	return fragment
}
