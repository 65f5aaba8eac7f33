package admission

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// seedsDir holds the published documents of the systems troupe replaces; CI clones the project
// with shared/ beside it.
var seedsDir = filepath.Join("..", "..", "..", "shared", "seeds")

// seedExample is one manifest of a seed document: a ```yaml block, or one document of it.
type seedExample struct {
	doc, name string
	obj       map[string]any
	// fragment: the document elides part of it ("..." lines, or containers without a name or
	// image); it is completed from the document's first whole example before it is created.
	fragment bool
}

var (
	yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")
	// elision is a line a document writes as "..." for what it leaves out, alone or as a list
	// item ("- ..." followed by the item's other fields); it is removed, keeping the "-".
	elision = regexp.MustCompile(`(?m)^(\s*-?)\s*\.\.\.\s*$`)
)

// seedExamples extracts the job manifests of a seed document, in order. Blocks without a spec
// (the status a document shows as command output) are not manifests and are left out.
func seedExamples(t *testing.T, doc string) []seedExample {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(seedsDir, doc))
	if err != nil {
		t.Fatalf("read the seed document: %v", err)
	}
	var out []seedExample
	for i, block := range yamlBlock.FindAllStringSubmatch(string(data), -1) {
		if strings.HasPrefix(block[1], "$ ") {
			continue // a terminal transcript (kubectl get -o yaml), not a manifest
		}
		for j, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(block[1], -1) {
			elided := elision.MatchString(part)
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(elision.ReplaceAllString(part, "$1")), &obj); err != nil {
				t.Fatalf("%s block %d: %v", doc, i+1, err)
			}
			if obj["spec"] == nil {
				continue
			}
			out = append(out, seedExample{
				doc: doc, name: fmt.Sprintf("block%d.%d", i+1, j+1), obj: obj,
				fragment: elided || obj["kind"] == nil || !namedContainers(obj["spec"]),
			})
		}
	}
	return out
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

// complete lays a fragment over the document's whole example: maps merge key by key, lists
// element by element (a fragment's first container completes the example's first), and the
// fragment's values win.
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

// Every job manifest in the documents of the systems troupe replaces is admitted by the real
// API server with the webhooks after changing only apiVersion, strict about fields (as kubectl
// is), so none of the seed's fields is dropped unknown; fragments are admitted once completed
// with what the document says they leave out.
func TestSeedExamplesAreAdmitted(t *testing.T) {
	// The least each document holds, so that a change in extraction cannot pass by finding
	// nothing: chainer-operator's example-job-mn and its GPU fragment; FFFFFaraway's
	// simple-train-cpu; T9k's mpi-example and its fragments (Horovod, resources, shared
	// memory, environment, scheduler, two debug and two pause modes).
	want := map[string]int{"chainer-operator.md": 2, "ffffaraway-mpi-operator.md": 1, "t9k-mpijob.md": 10}
	for doc, least := range want {
		t.Run(strings.TrimSuffix(doc, ".md"), func(t *testing.T) {
			examples := seedExamples(t, doc)
			if len(examples) < least {
				t.Fatalf("found %d job manifests in %s, want at least %d", len(examples), doc, least)
			}
			var base map[string]any
			for _, ex := range examples {
				if !ex.fragment && base == nil {
					base = ex.obj
				}
			}
			if base == nil {
				t.Fatalf("%s has no whole example to complete its fragments from", doc)
			}
			for _, ex := range examples {
				t.Run(ex.name, func(t *testing.T) {
					obj := ex.obj
					if ex.fragment {
						obj = complete(base, ex.obj).(map[string]any)
					}
					createSeed(t, obj)
				})
			}
		})
	}
}

// createSeed creates a seed manifest with only its apiVersion changed, in the namespace it names
// (made for it) or a fresh one, and deletes it again.
func createSeed(t *testing.T, manifest map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: manifest}
	u = u.DeepCopy()
	u.SetAPIVersion(troupev1.GroupVersion.String())
	ns := u.GetNamespace()
	if ns == "" {
		ns = newNamespace(t)
	} else {
		err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	u.SetNamespace(ns)
	if err := k8s.Create(context.Background(), u, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
		out, _ := yaml.Marshal(u.Object)
		t.Fatalf("refused: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), u) })
}
