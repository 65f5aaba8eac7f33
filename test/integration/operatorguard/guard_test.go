// Package operatorguard runs the cluster-wide install's RBAC and the operator's admission policy
// (config/install/operator-guard.yaml) on a real kube-apiserver, as the operator's
// ServiceAccount (impersonated): what a stolen operator token would try on the way to
// cluster-admin is refused, and the operator's own work on jobs of both transports is not.
package operatorguard

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

const (
	operatorNS = "troupe-system"
	tenant     = "tenant"
)

var (
	k8s      client.Client
	adminCfg *rest.Config
	scheme   = runtime.NewScheme()
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run these tests with `make test-integration`")
		return 1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.ErrorLevel)))
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, troupev1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "config", "crds")},
		ErrorIfCRDPathMissing: true,
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: time.Minute},
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		_ = env.Stop()
		return 1
	}
	defer func() { _ = env.Stop() }()
	adminCfg = cfg
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The cluster-wide install's operator pieces and RBAC, as `kubectl apply -k config/` makes
	// them (the CRDs are envtest's; no kubelet runs the Deployment: the test runs the operator).
	for _, dir := range []string{"install", "rbac"} {
		if err := testutil.ApplyKustomization(ctx, k8s, filepath.Join("..", "..", "..", "config", dir),
			func(obj *unstructured.Unstructured) bool { return obj.GetKind() != "Deployment" }); err != nil {
			fmt.Fprintf(os.Stderr, "install config/%s: %v\n", dir, err)
			return 1
		}
	}
	if err := waitForGuard(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// waitForGuard waits until the API server enforces the guard, which it loads a moment after
// the policy is created: a dry-run create in kube-system as the operator is refused.
func waitForGuard(ctx context.Context) error {
	op, err := client.New(asOperator(nil), client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: metav1.NamespaceSystem}}
		err := op.Create(ctx, probe, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "troupe-operator-guard") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the guard is not enforced after a minute: a create in kube-system gave %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// refused records the requests of the operator's identity that the API server refused.
type refused struct {
	mu   sync.Mutex
	list []string
}

func (r *refused) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, s)
}

func (r *refused) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.list...)
}

type recordRefusals struct {
	next http.RoundTripper
	rec  *refused
}

func (t recordRefusals) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	// client-go asks for a watch that starts with the list (sendInitialEvents) and lists instead
	// when the API server refuses it, as one without the WatchList feature does (1.30, 422): the
	// guard matches no read, so that refusal is not the guard's.
	watchList := req.Method == http.MethodGet && req.URL.Query().Get("sendInitialEvents") == "true"
	if resp != nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnprocessableEntity && !watchList) {
		t.rec.add(fmt.Sprintf("%s %s: %d", req.Method, req.URL.Path, resp.StatusCode))
	}
	return resp, err
}

// asOperator is the admin's config turned into the operator's ServiceAccount's.
func asOperator(rec *refused) *rest.Config {
	cfg := testutil.AsServiceAccount(adminCfg, operatorNS, "troupe-operator")
	if rec != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return recordRefusals{next: rt, rec: rec} })
	}
	return cfg
}

// What a stolen operator token would do on the way to cluster-admin, each refused with the
// guard's reason (RBAC allows every one of them to the cluster-wide install).
func TestStolenOperatorTokenIsRefused(t *testing.T) {
	ctx := context.Background()
	op, err := client.New(asOperator(nil), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "controller", Namespace: tenant},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "controller:1"}}}}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		obj        client.Object
	}{
		{"a token Secret for a privileged account in kube-system", "nothing in kube-system", &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "minted", Namespace: metav1.NamespaceSystem,
				Annotations: map[string]string{corev1.ServiceAccountNameKey: "clusterrole-aggregation-controller"}},
			Type: corev1.SecretTypeServiceAccountToken}},
		{"a token Secret in a tenant's namespace", "only the Secrets of troupe jobs", &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "minted", Namespace: tenant,
				Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
			Type: corev1.SecretTypeServiceAccountToken}},
		{"an unlabelled Secret", "only the Secrets of troupe jobs", &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: tenant}}},
		{"a Secret labelled as troupe's but owned by no job", "only the Secrets of troupe jobs", &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: tenant,
				Labels: map[string]string{troupev1.LabelManagedBy: troupev1.ManagedByTroupe}}}},
		{"a RoleBinding to admin", "only the RoleBinding <job>-exec", &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "mallory-admin", Namespace: tenant},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}}},
		{"a Role named like troupe's that reads Secrets", "only the Role <job>-exec", &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "x-exec", Namespace: tenant},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}}},
		{"a ConfigMap in kube-system", "nothing in kube-system", &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: metav1.NamespaceSystem}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := op.Create(ctx, c.obj)
			if err == nil || !strings.Contains(err.Error(), "troupe-operator-guard") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("create: %v, want a refusal by troupe-operator-guard saying %q", err, c.want)
			}
		})
	}
	t.Run("exec into a pod", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(asOperator(nil))
		if err != nil {
			t.Fatal(err)
		}
		req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(tenant).Name(pod.Name).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: "c", Command: []string{"cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"}, Stdout: true},
				clientgoscheme.ParameterCodec)
		exec, err := remotecommand.NewSPDYExecutor(asOperator(nil), http.MethodPost, req.URL())
		if err != nil {
			t.Fatal(err)
		}
		err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &strings.Builder{}})
		if err == nil || !strings.Contains(err.Error(), "execs into no pod") {
			t.Errorf("exec: %v, want a refusal by troupe-operator-guard", err)
		}
	})
}

// The operator, as its ServiceAccount under the cluster-wide install and the guard, runs an
// SSH MPIJob (its generated Secret) and a KubeExec ChainerJob (its exec Role and RoleBinding)
// with no request refused.
func TestJobsRunUnderTheGuard(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rec := &refused{}
	cfg := asOperator(rec)
	cacheOpts, err := engine.CacheOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Cache: cacheOpts, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := kinds.SetupControllers(mgr, controllers.Options{AgentImage: "troupe-agent:test"}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("operator stopped: %v", err)
		}
	}()
	defer func() { cancel(); <-stopped }()

	mpiJob := testutil.Load[*troupev1.MPIJob](t, "../../../examples/mpijob.yaml", tenant)
	mpiJob.Spec.Worker.Replicas = ptr.To[int32](2)
	mpiJob.Spec.Transport = troupev1.MPITransportSSH
	kx := testutil.MakeChainerJob("kx", tenant).WorkerSet("ws0", 2).Obj()
	kx.Spec.Transport = troupev1.MPITransportKubeExec
	for _, job := range []client.Object{mpiJob, kx} {
		if err := k8s.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mpi-example-ssh"}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "mpi-example-worker"}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "mpi-example-launcher"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kx-exec"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "kx-exec"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kx-exec"}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "kx-master"}},
	} {
		testutil.Eventually(t, fmt.Sprintf("%T %s", want, want.GetName()), 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: tenant, Name: want.GetName()}, want)
			return err == nil, client.IgnoreNotFound(err)
		})
	}
	// The Role follows the worker count: an update the guard sees too.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"workerSets":{"ws0":{"replicas":3}}}}`))
	if err := k8s.Patch(ctx, kx, patch); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the exec Role names 3 workers", 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		role := &rbacv1.Role{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "kx-exec"}, role); err != nil {
			return false, err
		}
		return len(role.Rules) > 0 && len(role.Rules[0].ResourceNames) == 3, nil
	})
	if got := rec.all(); len(got) > 0 {
		t.Errorf("requests of the operator refused: %q", got)
	}

	// Adoption (adopt.go): a child whose owner reference was removed is taken back by the job
	// whose UID it is labelled with; a tenant's Secret is not.
	op, err := client.New(asOperator(nil), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	owner := *metav1.NewControllerRef(mpiJob, troupev1.GroupVersion.WithKind("MPIJob"))
	for _, c := range []struct {
		name, secret string
		labels       map[string]string
		adopted      bool
	}{
		{"an orphan of the job", "orphan", map[string]string{troupev1.LabelManagedBy: troupev1.ManagedByTroupe, troupev1.LabelJobUID: string(mpiJob.UID)}, true},
		{"a tenant's Secret", "tenants", nil, false},
	} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.secret, Namespace: tenant, Labels: c.labels}}
		if err := k8s.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		before := secret.DeepCopy()
		secret.Labels = map[string]string{troupev1.LabelManagedBy: troupev1.ManagedByTroupe, troupev1.LabelJobUID: string(mpiJob.UID)}
		secret.OwnerReferences = []metav1.OwnerReference{owner}
		err := op.Patch(ctx, secret, client.MergeFrom(before))
		if c.adopted && err != nil {
			t.Errorf("%s: adoption refused: %v", c.name, err)
		}
		if !c.adopted && (err == nil || !strings.Contains(err.Error(), "troupe-operator-guard")) {
			t.Errorf("%s: taken over: %v, want a refusal by the guard", c.name, err)
		}
	}
}
