package kinds_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/test/chaos/tamper"
	"github.com/troupe-dev/troupe/webhooks"
)

// Every place a registered kind must be, each checked for every kind of the registry: a kind
// whose file was added to the registry and left out of any of them fails here, naming the
// place (docs/architecture.md, "Adding a kind", counts them). The places make manifests
// writes are checked as committed, so a kind whose generated files were not regenerated fails
// too. The chaos run needs nothing of a kind but its Sample: its shapes, scale patches and job
// lists range over the registry, and its tamperings are those the Sample job's children allow,
// checked here.
func TestEveryKindIsEverywhere(t *testing.T) {
	crds := crdsByKind(t)
	mutating, validating := webhookResources(t)
	jobsRole := clusterRoleResources(t, filepath.Join("..", "config", "rbac", "jobs", "role.yaml"), "troupe-operator")
	editRole := clusterRoleResources(t, filepath.Join("..", "config", "rbac", "users", "roles.yaml"), "troupe-edit")
	frameworks := kueueFrameworks(t)
	examples := exampleKinds(t)
	kindsDoc := readFile(t, filepath.Join("..", "docs", "kinds.md"))
	// Helm leaves the CRDs; docs/operations.md says how to delete them without a checkout.
	crdUninstall := regexp.MustCompile(`kubectl delete crd( [a-z]+\.troupe\.dev)+`).FindString(readFile(t, filepath.Join("..", "docs", "operations.md")))
	adapterOptions := controllers.Options{AgentImage: "agent:1"}
	for _, k := range kinds.All() {
		t.Run(k.Name, func(t *testing.T) {
			plural, ok := crds[k.Name]
			if !ok {
				t.Fatalf("no CRD in config/crds (make manifests writes it from the types file)")
			}
			for place, resources := range map[string][]string{
				"the mutating webhook configuration (config/webhook, from the webhook file's markers)":   mutating,
				"the validating webhook configuration (config/webhook, from the webhook file's markers)": validating,
				"the users' edit role (config/rbac/users, make manifests)":                               editRole,
			} {
				if !slices.Contains(resources, plural) {
					t.Errorf("%s lacks %s", place, plural)
				}
			}
			for _, r := range []string{plural, plural + "/status", plural + "/finalizers"} {
				if !slices.Contains(jobsRole, r) {
					t.Errorf("the operator's role (config/rbac/jobs, from the kind file's RBAC markers) lacks %s", r)
				}
			}
			if want := k.Name + "." + troupev1.GroupVersion.Version + "." + troupev1.GroupVersion.Group; !slices.Contains(frameworks, want) {
				t.Errorf("hack/controlplane/kueue-config.yaml lacks the external framework %s (make manifests)", want)
			}
			if !examples[k.Name] {
				t.Errorf("no example of the kind in examples/")
			}
			if !regexp.MustCompile(`(?m)^## ` + k.Name + `\b`).MatchString(kindsDoc) {
				t.Errorf("docs/kinds.md has no section ## %s", k.Name)
			}
			if !slices.Contains(strings.Fields(crdUninstall), plural+"."+troupev1.GroupVersion.Group) {
				t.Errorf("docs/operations.md's %q does not delete its CRD", crdUninstall)
			}
			// The engine's cache keeps the label that maps a pod to its job.
			adapter := k.Adapter(adapterOptions)
			if got := adapter.NameLabel(); got != troupev1.NameLabel(k.Name) || !slices.Contains(troupev1.LabelsRead, got) {
				t.Errorf("the adapter's name label %q: want %q, among troupev1.LabelsRead %v", got, troupev1.NameLabel(k.Name), troupev1.LabelsRead)
			}
			// The harnesses' job of the kind is admitted and runs, and is tampered with.
			sample := k.Sample(kinds.Sample{Name: "sample", Namespace: "ns", Image: "sample:1", WorkerSets: []int32{2}})
			if errs := k.Admit(sample, webhooks.Options{}); len(errs) > 0 {
				t.Errorf("its Sample is refused: %v", errs.ToAggregate())
			}
			if err := adapter.Describe(sample, &engine.Spec{Name: "sample", Namespace: "ns"}); err != nil {
				t.Errorf("its Sample cannot run: %v", err)
			}
			if len(tamper.Actions(k.Name)) == 0 {
				t.Errorf("no tampering of the chaos run applies to its Sample job (test/chaos/tamper: Actions)")
			}
		})
	}
}

// The registry lists each kind once, sorted by name (the order the operator sets them up in).
func TestRegistryIsSortedAndUnique(t *testing.T) {
	var names []string
	for _, k := range kinds.All() {
		names = append(names, k.Name)
	}
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("registry %v: want each kind once, sorted by name", names)
	}
}

// Every CRD the install ships is a registered kind, and every registered kind names itself as
// its object's API kind: a kind whose file was forgotten would be served by the API server
// with no controller and no webhook behind it.
func TestEveryCRDIsARegisteredKind(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := troupev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var registered []string
	for _, k := range kinds.All() {
		registered = append(registered, k.Name)
		gvk, err := apiutil.GVKForObject(k.NewObject(), scheme)
		if err != nil || gvk.Kind != k.Name {
			t.Errorf("kind %s: its object is %v (%v)", k.Name, gvk, err)
		}
	}
	served := slices.Sorted(func(yield func(string) bool) {
		for kind := range crdsByKind(t) {
			if !yield(kind) {
				return
			}
		}
	})
	if !slices.Equal(served, registered) {
		t.Errorf("config/crds has %v, the registry %v", served, registered)
	}
}

// Kueue manages troupe's jobs through its external frameworks: the local cluster's Kueue
// configuration (and so docs/kueue.md's example) names every registered kind, and only those
// (make manifests writes the list: hack/kueueframeworks).
func TestKueueConfigNamesEveryKind(t *testing.T) {
	var want []string
	for _, k := range kinds.All() {
		want = append(want, k.Name+"."+troupev1.GroupVersion.Version+"."+troupev1.GroupVersion.Group)
	}
	if got := slices.Sorted(slices.Values(kueueFrameworks(t))); !slices.Equal(got, want) {
		t.Errorf("kueue-config.yaml externalFrameworks %v, want %v: run make manifests", got, want)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// documents are the YAML documents of a file, each decoded into a new T.
func documents[T any](t *testing.T, path string) []T {
	t.Helper()
	var out []T
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(readFile(t, path), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var v T
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	return out
}

// crdsByKind are the plurals of the CRDs in config/crds, by kind.
func crdsByKind(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "config", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		type crd struct {
			Spec struct {
				Names struct{ Kind, Plural string } `json:"names"`
			} `json:"spec"`
		}
		for _, c := range documents[crd](t, f) {
			out[c.Spec.Names.Kind] = c.Spec.Names.Plural
		}
	}
	return out
}

// webhookResources are the resources the mutating and the validating webhooks of
// config/webhook are called for.
func webhookResources(t *testing.T) (mutating, validating []string) {
	t.Helper()
	type configuration struct {
		Kind     string
		Webhooks []struct {
			Rules []struct{ Resources []string } `json:"rules"`
		} `json:"webhooks"`
	}
	for _, c := range documents[configuration](t, filepath.Join("..", "config", "webhook", "manifests.yaml")) {
		for _, w := range c.Webhooks {
			for _, r := range w.Rules {
				switch c.Kind {
				case "MutatingWebhookConfiguration":
					mutating = append(mutating, r.Resources...)
				case "ValidatingWebhookConfiguration":
					validating = append(validating, r.Resources...)
				}
			}
		}
	}
	return mutating, validating
}

// clusterRoleResources are the troupe.dev resources the ClusterRole name of path grants
// anything on.
func clusterRoleResources(t *testing.T, path, name string) []string {
	t.Helper()
	type role struct {
		Kind     string
		Metadata struct{ Name string } `json:"metadata"`
		Rules    []struct {
			APIGroups []string `json:"apiGroups"`
			Resources []string `json:"resources"`
		} `json:"rules"`
	}
	var out []string
	for _, r := range documents[role](t, path) {
		if r.Kind != "ClusterRole" || r.Metadata.Name != name {
			continue
		}
		for _, rule := range r.Rules {
			if slices.Contains(rule.APIGroups, troupev1.GroupVersion.Group) {
				out = append(out, rule.Resources...)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no ClusterRole %s granting anything on %s", path, name, troupev1.GroupVersion.Group)
	}
	return out
}

// kueueFrameworks are the external frameworks of the local cluster's Kueue configuration.
func kueueFrameworks(t *testing.T) []string {
	t.Helper()
	type configuration struct {
		Integrations struct {
			ExternalFrameworks []string `json:"externalFrameworks"`
		} `json:"integrations"`
	}
	return documents[configuration](t, filepath.Join("..", "hack", "controlplane", "kueue-config.yaml"))[0].Integrations.ExternalFrameworks
}

// exampleKinds are the kinds of the documents of examples/*.yaml.
func exampleKinds(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range files {
		for _, doc := range documents[struct{ Kind string }](t, f) {
			out[doc.Kind] = true
		}
	}
	return out
}
