package admission

import (
	"context"
	"os"
	"path/filepath"
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

// seedManifestsDir holds the job manifests of the published documents of the systems troupe
// replaces, one folder per document, written from the documents by hack/seedmanifests
// (fragments completed there).
var seedManifestsDir = filepath.Join("..", "manifests", "seeds")

// seedManifestFiles is every seed manifest file, found by glob.
func seedManifestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(seedManifestsDir, "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// readManifest reads one manifest file.
func readManifest(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return obj
}

// Every job manifest in the documents of the systems troupe replaces is admitted by the real
// API server with the webhooks after changing only apiVersion, strict about fields (as kubectl
// is), so none of the seed's fields is dropped unknown; fragments are admitted as completed
// with what the document says they leave out.
func TestSeedExamplesAreAdmitted(t *testing.T) {
	// The least each document holds, so that a lost file cannot pass by finding nothing:
	// chainer-operator's example-job-mn and its GPU fragment; FFFFFaraway's simple-train-cpu;
	// T9k's mpi-example and its fragments (Horovod, resources, shared memory, environment,
	// scheduler, two debug and two pause modes).
	want := map[string]int{"chainer-operator": 2, "ffffaraway-mpi-operator": 1, "t9k-mpijob": 10}
	found := map[string]int{}
	for _, f := range seedManifestFiles(t) {
		doc := filepath.Base(filepath.Dir(f))
		found[doc]++
		t.Run(doc+"/"+strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			createSeed(t, readManifest(t, f))
		})
	}
	for doc, least := range want {
		if found[doc] < least {
			t.Errorf("found %d job manifests of %s in %s, want at least %d", found[doc], doc, seedManifestsDir, least)
		}
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
