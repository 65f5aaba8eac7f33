package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// kubectl runs the real kubectl against the test API server and returns its output. Right
// after the suite starts, kubectl's discovery may not list the CRDs yet, so a failing call is
// retried until the wait timeout.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	var out string
	eventually(t, "kubectl "+strings.Join(args, " "), func(context.Context) (bool, error) {
		var err error
		out, err = runKubectl(args...)
		return err == nil, err
	})
	return out
}

func runKubectl(args ...string) (string, error) {
	admin, err := testEnv.AddUser(envtest.User{Name: "test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("add kubectl user: %w", err)
	}
	k, err := admin.Kubectl()
	if err != nil {
		return "", fmt.Errorf("kubectl: %w", err)
	}
	stdout, stderr, err := k.Run(args...)
	out, _ := io.ReadAll(stdout)
	if err != nil {
		errOut, _ := io.ReadAll(stderr)
		return "", fmt.Errorf("%w: %s", err, errOut)
	}
	return string(out), nil
}

// What a user sees with kubectl: descriptions, printer columns, short name and category.
func TestKubectlView(t *testing.T) {
	explain := kubectl(t, "explain", "chainerjob.spec.workerSets")
	for _, want := range []string{"heterogeneous", "keyed by the set's name", "replicas", "mpiConfig"} {
		if !strings.Contains(explain, want) {
			t.Errorf("kubectl explain chainerjob.spec.workerSets lacks %q:\n%s", want, explain)
		}
	}

	ns := newNamespace(t)
	create(t, testutil.MakeChainerJob("viewed", ns).WorkerSet("ws0", 2).Obj())
	waitForJob(t, ns, "viewed", "a status", func(j *troupev1.ChainerJob) bool {
		return meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized) != nil
	})

	table := kubectl(t, "get", "chainerjobs", "-n", ns)
	header := strings.Fields(strings.SplitN(table, "\n", 2)[0])
	if strings.Join(header, " ") != "NAME PHASE WORKERS REASON PROGRESS ETA AGE" {
		t.Errorf("kubectl get chainerjobs header = %v, want NAME PHASE WORKERS REASON PROGRESS ETA AGE\n%s", header, table)
	}
	if !strings.Contains(table, "viewed") || !strings.Contains(table, "0/2") {
		t.Errorf("kubectl get chainerjobs does not show the job's workers:\n%s", table)
	}
	for _, resource := range []string{"chj", "troupe"} {
		if out := kubectl(t, "get", resource, "-n", ns); !strings.Contains(out, "viewed") {
			t.Errorf("kubectl get %s does not list the job:\n%s", resource, out)
		}
	}
	wide := kubectl(t, "get", "chainerjobs", "-n", ns, "-o", "wide")
	if !strings.Contains(wide, "BACKEND") || !strings.Contains(wide, "STARTED") {
		t.Errorf("kubectl get -o wide lacks the wide columns:\n%s", wide)
	}
}

// The installs (kubectl apply --server-side -k config/, and config/namespaced) render and are
// accepted by the API server, and every webhook reaches the operator through its Service; and
// deploy/, the directory users hand to kubectl -f, holds only objects kubectl applies.
func TestInstallManifests(t *testing.T) {
	out := kubectl(t, "kustomize", "../../config")
	// Two webhooks (defaulting and validation) per registered kind.
	if n, want := strings.Count(out, "name: troupe-webhook-service\n      namespace: troupe-system"), 2*len(kinds.All()); n != want {
		t.Errorf("%d webhooks point at troupe-system/troupe-webhook-service, want all %d:\n%s", n, want, out)
	}
	if strings.Contains(out, "namespace: system\n") {
		t.Errorf("a webhook still points at the placeholder namespace")
	}
	f := filepath.Join(t.TempDir(), "troupe.yaml")
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	// A dry run creates nothing, so the namespace the rest lives in must exist already.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "troupe-system"}}
	if err := k8s.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kubectl(t, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", f)
	// kubectl -f DIR reads every file of DIR: one that is not an object (a kustomization) fails
	// the command after the others were created.
	kubectl(t, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "../../deploy/")

	// The namespace-scoped install too, into the namespace it watches.
	nsOut := kubectl(t, "kustomize", "../../config/namespaced")
	nsFile := filepath.Join(t.TempDir(), "troupe-namespaced.yaml")
	if err := os.WriteFile(nsFile, []byte(nsOut), 0o644); err != nil {
		t.Fatal(err)
	}
	jobs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "troupe-jobs"}}
	if err := k8s.Create(context.Background(), jobs); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kubectl(t, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", nsFile)
}
