package admission

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// The everyday kubectl flows of docs/admission.md ("Updates as users make them"), run with the
// real kubectl over every job manifest of examples/ and of the seed documents, found by glob: what
// users and GitOps tools (Argo CD, Flux) do to a job they created. An update that changes no field
// the user wrote is accepted; a mutable field changed takes effect; an immutable one is refused
// naming it alone.

// userManifest is one job manifest as a user has it: a file of examples/ or a seed's example
// with only its apiVersion changed.
type userManifest struct {
	name string
	obj  map[string]any
}

// userManifests finds every job manifest of examples/*.yaml and of the published manifests
// troupe takes (testutil.UserManifests), of the kinds troupe serves.
func userManifests(t *testing.T) []userManifest {
	t.Helper()
	served := map[string]bool{}
	for _, k := range kinds.All() {
		served[k.Name] = true
	}
	found, err := testutil.UserManifests(filepath.Join("..", ".."), func(kind string) bool { return served[kind] })
	if err != nil {
		t.Fatal(err)
	}
	var out []userManifest
	for _, m := range found {
		out = append(out, userManifest{name: m.Name, obj: m.Object})
	}
	return out
}

// kubectlUser runs the real kubectl as a cluster admin, with the environment a test gives it
// (KUBE_EDITOR) and what it reads on standard input.
type kubectlUser struct{ kubeconfig string }

var (
	userOnce sync.Once
	theUser  kubectlUser
	userErr  error
)

func cliUser(t *testing.T) kubectlUser {
	t.Helper()
	userOnce.Do(func() {
		var admin *envtest.AuthenticatedUser
		admin, userErr = testEnv.AddUser(envtest.User{Name: "kubectl-user", Groups: []string{"system:masters"}}, nil)
		if userErr != nil {
			return
		}
		var cfg []byte
		if cfg, userErr = admin.KubeConfig(); userErr != nil {
			return
		}
		dir, err := os.MkdirTemp("", "troupe-kubectl-")
		if err != nil {
			userErr = err
			return
		}
		theUser.kubeconfig = filepath.Join(dir, "kubeconfig")
		userErr = os.WriteFile(theUser.kubeconfig, cfg, 0o600)
	})
	if userErr != nil {
		t.Fatal(userErr)
	}
	return theUser
}

// run runs kubectl and returns its standard output and error together, and its exit code.
func (u kubectlUser) run(stdin string, env []string, args ...string) (string, int) {
	cmd := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+u.kubeconfig), env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		return err.Error(), -1
	}
	return string(out), 0
}

// mustRun runs kubectl and fails the test unless it exits 0.
func (u kubectlUser) mustRun(t *testing.T, stdin string, env []string, args ...string) string {
	t.Helper()
	out, code := u.run(stdin, env, args...)
	if code != 0 {
		t.Fatalf("kubectl %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// placed writes a manifest into a file, in namespace ns (the one it names is the user's; a
// test's own keeps the flows apart), and returns the file's path.
func placed(t *testing.T, obj map[string]any, ns string) string {
	t.Helper()
	obj = deepCopyJSON(obj)
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	meta["namespace"] = ns
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func deepCopyJSON(obj map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
}

// stored reads the job a manifest made.
func stored(t *testing.T, m userManifest, ns string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(troupev1.GroupVersion.String())
	u.SetKind(fmt.Sprint(m.obj["kind"]))
	name, _, _ := unstructured.NestedString(m.obj, "metadata", "name")
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

// mutableChange is a change a user makes to a running job that must be accepted and take
// effect: the path it sets and the value.
type mutableChange struct {
	name  string
	path  []string
	value any
}

// mutableChanges lists the changes that apply to a job as stored: the TTL, labels,
// annotations, suspend, pause (where the kind has run modes) and every worker count found in
// its spec, moved by one within its bounds.
func mutableChanges(user kubectlUser, job *unstructured.Unstructured) []mutableChange {
	changes := []mutableChange{
		{"ttlSecondsAfterFinished", []string{"spec", "runPolicy", "ttlSecondsAfterFinished"}, int64(600)},
		{"a label", []string{"metadata", "labels", "team"}, "vision"},
		{"an annotation", []string{"metadata", "annotations", "example.com/owner"}, "someone"},
		{"suspend", []string{"spec", "runPolicy", "suspend"}, true},
	}
	// The kinds with run modes: the CRD says, as kubectl explain shows it.
	if _, code := user.run("", nil, "explain", strings.ToLower(job.GetKind())+".spec.runMode.pause.enabled"); code == 0 {
		changes = append(changes, mutableChange{"runMode pause", []string{"spec", "runMode", "pause", "enabled"}, true})
	}
	lowest, highest := int64(1), int64(troupev1.MaxWorkerReplicas)
	spec, _ := job.Object["spec"].(map[string]any)
	for _, k := range sortedKeys(spec) { // elastic bounds (HorovodJob's elastic, PyTorchJob's elasticPolicy)
		if isElasticBounds(spec[k]) {
			lowest, _, _ = unstructured.NestedInt64(spec, k, "minReplicas")
			highest, _, _ = unstructured.NestedInt64(spec, k, "maxReplicas")
		}
	}
	for _, p := range workerCounts(job.Object["spec"], []string{"spec"}) {
		n, _, _ := unstructured.NestedInt64(job.Object, p...)
		next := n + 1
		if next > highest {
			next = n - 1
		}
		if next < lowest {
			continue
		}
		changes = append(changes, mutableChange{"worker count " + strings.Join(p, "."), p, next})
	}
	return changes
}

// isElasticBounds says whether v is the elastic bounds of a kind's workers, whatever the kind
// calls them: an object with minReplicas (and maxReplicas).
func isElasticBounds(v any) bool {
	m, ok := v.(map[string]any)
	_, hasMin := m["minReplicas"]
	return ok && hasMin
}

// workerCounts finds the worker counts of a spec: every replicas or numWorkers field outside
// pod templates.
func workerCounts(v any, at []string) [][]string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var out [][]string
	for _, k := range sortedKeys(m) {
		p := append(slices.Clone(at), k)
		switch {
		case k == "template" || strings.HasSuffix(k, "Template") || isElasticBounds(m[k]):
		case k == "Launcher" || k == "Master": // kubeflow's forms: one pod, not a worker count
		case k == "replicas" || k == "numWorkers":
			if _, isNumber := m[k].(int64); isNumber {
				out = append(out, p)
			}
		default:
			out = append(out, workerCounts(m[k], p)...)
		}
	}
	return out
}

// firstImage finds the path of the first container image of a spec, in sorted key order.
func firstImage(v any, at []string) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	for _, k := range sortedKeys(m) {
		if k == "containers" {
			if cs, ok := m[k].([]any); ok && len(cs) > 0 {
				return append(slices.Clone(at), k, "0", "image")
			}
		}
		if p := firstImage(m[k], append(slices.Clone(at), k)); p != nil {
			return p
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// setPath sets a value at a path of maps and list indexes, making the maps it lacks.
func setPath(obj map[string]any, path []string, value any) {
	var cur any = obj
	for i, k := range path {
		last := i == len(path)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[k] = value
				return
			}
			if c[k] == nil {
				c[k] = map[string]any{}
			}
			cur = c[k]
		case []any:
			var idx int
			_, _ = fmt.Sscan(k, &idx)
			if last {
				c[idx] = value
				return
			}
			cur = c[idx]
		}
	}
}

// fieldPaths are the field paths an API error names ("spec.x.y[0].z: Forbidden: ...").
var fieldPaths = regexp.MustCompile(`(?m)(?:^|: |\* )((?:spec|metadata)(?:\.[A-Za-z0-9_-]+|\[[^\]]+\])*): [A-Z]`)

func TestKubectlFlowsOverEveryManifest(t *testing.T) {
	manifests := userManifests(t)
	// The least the glob must find: the 12 example files and the seeds' job manifests checked
	// by TestSeedExamplesAreAdmitted (13), so that a change in extraction cannot pass by
	// finding nothing.
	if len(manifests) < 25 {
		t.Fatalf("found %d job manifests, want at least 25", len(manifests))
	}
	user := cliUser(t)
	var flows int
	var mu sync.Mutex
	count := func() { mu.Lock(); flows++; mu.Unlock() }
	t.Cleanup(func() { t.Logf("%d manifests, %d kubectl flows", len(manifests), flows) })

	for _, m := range manifests {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			t.Run("apply twice", func(t *testing.T) {
				ns := newNamespace(t)
				f := placed(t, m.obj, ns)
				user.mustRun(t, "", nil, "apply", "-f", f)
				before := stored(t, m, ns)
				out := user.mustRun(t, "", nil, "apply", "-f", f)
				if !strings.Contains(out, " unchanged") && !strings.Contains(out, " configured") {
					t.Errorf("second apply said %q, want unchanged or configured", out)
				}
				if after := stored(t, m, ns); after.GetGeneration() != before.GetGeneration() {
					t.Errorf("second apply changed the spec: generation %d -> %d", before.GetGeneration(), after.GetGeneration())
				}
				count()
			})
			t.Run("diff after apply", func(t *testing.T) {
				ns := newNamespace(t)
				f := placed(t, m.obj, ns)
				user.mustRun(t, "", nil, "apply", "-f", f)
				if out, code := user.run("", nil, "diff", "-f", f); code != 0 {
					t.Errorf("kubectl diff right after apply: exit %d, want 0 (no drift)\n%s", code, out)
				}
				count()
			})
			t.Run("server-side apply", func(t *testing.T) {
				ns := newNamespace(t)
				f := placed(t, m.obj, ns)
				user.mustRun(t, "", nil, "apply", "--server-side", "-f", f)
				user.mustRun(t, "", nil, "apply", "--server-side", "-f", f)
				ns = newNamespace(t)
				f = placed(t, m.obj, ns)
				// Argo CD's move to server-side apply: a job made by client-side apply, then
				// applied server-side by another field manager.
				user.mustRun(t, "", nil, "apply", "-f", f)
				user.mustRun(t, "", nil, "apply", "--server-side", "--field-manager=argocd", "-f", f)
				if out, code := user.run("", nil, "diff", "--server-side", "--field-manager=argocd", "-f", f); code != 0 {
					t.Errorf("kubectl diff --server-side after apply: exit %d, want 0\n%s", code, out)
				}
				count()
			})
			t.Run("replace and edit", func(t *testing.T) {
				ns := newNamespace(t)
				f := placed(t, m.obj, ns)
				user.mustRun(t, "", nil, "apply", "-f", f)
				live := user.mustRun(t, "", nil, "get", "-f", f, "-o", "yaml")
				user.mustRun(t, live, nil, "replace", "-f", "-")
				// kubectl edit, scripted: the editor sets the TTL.
				user.mustRun(t, "", nil, "patch", "-f", f, "--type=merge", "-p", `{"spec":{"runPolicy":{"ttlSecondsAfterFinished":600}}}`)
				editor := filepath.Join(t.TempDir(), "editor.sh")
				script := "#!/bin/sh\nsed -i 's/ttlSecondsAfterFinished: 600$/ttlSecondsAfterFinished: 900/' \"$1\"\n"
				if err := os.WriteFile(editor, []byte(script), 0o700); err != nil {
					t.Fatal(err)
				}
				out := user.mustRun(t, "", []string{"KUBE_EDITOR=" + editor}, "edit", "-n", ns, strings.ToLower(fmt.Sprint(m.obj["kind"]))+"/"+stored(t, m, ns).GetName())
				if !strings.Contains(out, "edited") {
					t.Errorf("kubectl edit said %q, want edited", out)
				}
				if ttl, _, _ := unstructured.NestedInt64(stored(t, m, ns).Object, "spec", "runPolicy", "ttlSecondsAfterFinished"); ttl != 900 {
					t.Errorf("after kubectl edit the TTL is %d, want 900", ttl)
				}
				count()
			})
			t.Run("mutable fields", func(t *testing.T) {
				ns := newNamespace(t)
				user.mustRun(t, "", nil, "apply", "-f", placed(t, m.obj, ns))
				for _, c := range mutableChanges(user, stored(t, m, ns)) {
					changed := deepCopyJSON(m.obj)
					setPath(changed, c.path, c.value)
					if out, code := user.run("", nil, "apply", "-f", placed(t, changed, ns)); code != 0 {
						t.Errorf("apply with %s changed: exit %d\n%s", c.name, code, out)
						continue
					}
					got, _, _ := unstructured.NestedFieldNoCopy(stored(t, m, ns).Object, c.path...)
					if fmt.Sprint(got) != fmt.Sprint(c.value) {
						t.Errorf("after applying %s = %v the job has %v", c.name, c.value, got)
					}
					// Back to the manifest as written: the change is undone, accepted too.
					if out, code := user.run("", nil, "apply", "-f", placed(t, m.obj, ns)); code != 0 {
						t.Errorf("apply undoing %s: exit %d\n%s", c.name, code, out)
					}
					count()
				}
			})
			t.Run("image changed is refused naming it", func(t *testing.T) {
				ns := newNamespace(t)
				user.mustRun(t, "", nil, "apply", "-f", placed(t, m.obj, ns))
				p := firstImage(m.obj["spec"], []string{"spec"})
				if p == nil {
					t.Fatal("the manifest has no container")
				}
				changed := deepCopyJSON(m.obj)
				setPath(changed, p, "registry.example/other:2")
				out, code := user.run("", nil, "apply", "-f", placed(t, changed, ns))
				if code == 0 {
					t.Fatalf("apply with %s changed was accepted:\n%s", strings.Join(p, "."), out)
				}
				named := fieldPaths.FindAllStringSubmatch(out, -1)
				if len(named) != 1 || !strings.HasSuffix(named[0][1], ".containers[0].image") {
					t.Errorf("the refusal names %v, want the changed image alone:\n%s", named, out)
				}
				count()
			})
		})
	}
}
