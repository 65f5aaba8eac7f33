// Package operatorguard runs the cluster-wide install's RBAC and the operator's admission policy
// (config/install/operator-guard.yaml) on a real kube-apiserver, as the operator's
// ServiceAccount (impersonated): what a stolen operator token would try on the way to
// cluster-admin is refused, and the operator's own work on jobs of both transports is not.
package operatorguard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
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
	// tenant is opted in to troupe jobs (labelled troupe.dev/jobs=enabled); closed is not.
	tenant = "tenant"
	closed = "closed"
)

var (
	k8s      client.Client
	adminCfg *rest.Config
	testEnv  *envtest.Environment
	scheme   = runtime.NewScheme()
	// optedIn is the label by which a cluster admin opts a namespace in to troupe jobs.
	optedIn = map[string]string{troupev1.LabelJobsNamespace: troupev1.JobsNamespaceEnabled}
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
	adminCfg, testEnv = cfg, env
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	ctx := context.Background()
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: tenant, Labels: optedIn}},
		{ObjectMeta: metav1.ObjectMeta{Name: closed}},
	} {
		if err := k8s.Create(ctx, ns); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
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

// waitForGuard waits until the API server enforces the guard and the policy on jobs'
// namespaces, which it loads a moment after they are created: a dry-run create in kube-system
// as the operator, and of a job in a namespace not opted in, are refused.
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
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the guard is not enforced after a minute: a create in kube-system gave %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return waitJobCreate(ctx, closed, false)
}

// waitJobCreate waits until the API server's policy troupe-job-namespaces admits (admitted) or
// refuses a dry-run create of a job in ns: it reads namespaces' labels from a cache, which
// follows a label's change a moment later.
func waitJobCreate(ctx context.Context, ns string, admitted bool) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := k8s.Create(ctx, testutil.MakeChainerJob("probe", ns).Obj(), client.DryRunAll)
		refused := err != nil && strings.Contains(err.Error(), "troupe-job-namespaces")
		if err != nil && !refused {
			return err
		}
		if refused != admitted {
			return nil
		}
		if time.Now().After(deadline) && err == nil {
			return fmt.Errorf("a job's create in %s is still admitted after a minute, want it refused", ns)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("a job's create in %s is still refused after a minute: %w", ns, err)
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
		{"a batch Job of no troupe job, privileged, as another ServiceAccount", "only the children of troupe jobs", &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "miner", Namespace: tenant},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: "deployer",
				Containers: []corev1.Container{{Name: "c", Image: "miner:1", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}},
				Volumes:    []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
			}}}}},
		{"a Job labelled as troupe's but controlled by no troupe job", "only the children of troupe jobs", &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: tenant, Labels: map[string]string{troupev1.LabelManagedBy: troupev1.ManagedByTroupe}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "miner:1"}}}}}}},
		{"a Role x-exec of job x granting exec on a pod not the job's", "only the Role <job>-exec", execRole("x-exec", "x", "controller")},
		{"a Role x-exec on job x's pods, controlled by another job", "only the Role <job>-exec", execRole("x-exec", "y", "x-worker-0")},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := op.Create(ctx, c.obj)
			if err == nil || !strings.Contains(err.Error(), "troupe-operator-guard") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("create: %v, want a refusal by troupe-operator-guard saying %q", err, c.want)
			}
		})
	}
	t.Run("namespaces not opted in", func(t *testing.T) { notOptedIn(ctx, t, op) })
	// Another tenant's workload and network objects, which RBAC lets the operator change: each
	// change and delete is refused.
	foreign := []client.Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: tenant}, Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:1"}}}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: tenant}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "db"}, Ports: []corev1.ServicePort{{Port: 5432}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: tenant}, Data: map[string]string{"mode": "safe"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: tenant}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: tenant}, Spec: policyv1.PodDisruptionBudgetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, MinAvailable: ptr.To(intstr.FromInt32(1))}},
	}
	for _, obj := range foreign {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	changes := []struct {
		name  string
		obj   client.Object
		patch string
	}{
		{"the template of another tenant's StatefulSet", foreign[0], `{"spec":{"template":{"spec":{"containers":[{"name":"db","image":"miner:1"}]}}}}`},
		{"the selector of another tenant's Service", foreign[1], `{"spec":{"selector":{"app":"miner"}}}`},
		{"another tenant's ConfigMap", foreign[2], `{"data":{"mode":"open"}}`},
	}
	for _, c := range changes {
		t.Run("patch "+c.name, func(t *testing.T) {
			err := op.Patch(ctx, c.obj, client.RawPatch(types.StrategicMergePatchType, []byte(c.patch)))
			if err == nil || !strings.Contains(err.Error(), "only the children of troupe jobs") {
				t.Errorf("patch: %v, want a refusal by troupe-operator-guard", err)
			}
		})
	}
	for _, obj := range append(foreign[3:], client.Object(pod)) {
		t.Run(fmt.Sprintf("delete another tenant's %T", obj), func(t *testing.T) {
			err := op.Delete(ctx, obj)
			if err == nil || !strings.Contains(err.Error(), "only the children of troupe jobs") {
				t.Errorf("delete: %v, want a refusal by troupe-operator-guard", err)
			}
		})
	}

	// The operator's webhook configuration: its caBundle is the operator's to rotate; pointing
	// it elsewhere or widening what it is sent is refused.
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "troupe-validating-webhook-configuration"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "vnothing.troupe.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://troupe.invalid/validate")},
			Rules:                   []admissionregistrationv1.RuleWithOperations{nothingRule("things")},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := k8s.Create(ctx, hook); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		change  func(h *admissionregistrationv1.ValidatingWebhookConfiguration)
		allowed bool
	}{
		{"a new caBundle", func(h *admissionregistrationv1.ValidatingWebhookConfiguration) {
			h.Webhooks[0].ClientConfig.CABundle = []byte("rotated")
		}, true},
		{"the webhook sent elsewhere", func(h *admissionregistrationv1.ValidatingWebhookConfiguration) {
			h.Webhooks[0].ClientConfig.URL = ptr.To("https://mallory.invalid/collect")
		}, false},
		{"every Secret sent to it", func(h *admissionregistrationv1.ValidatingWebhookConfiguration) {
			h.Webhooks[0].Rules = append(h.Webhooks[0].Rules, admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}}})
		}, false},
		{"a second webhook", func(h *admissionregistrationv1.ValidatingWebhookConfiguration) {
			w := *h.Webhooks[0].DeepCopy()
			w.Name = "vsecrets.mallory.dev"
			h.Webhooks = append(h.Webhooks, w)
		}, false},
		{"its failure policy", func(h *admissionregistrationv1.ValidatingWebhookConfiguration) {
			h.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		}, false},
	} {
		t.Run("webhook configuration: "+c.name, func(t *testing.T) {
			cur := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := op.Get(ctx, client.ObjectKeyFromObject(hook), cur); err != nil {
				t.Fatal(err)
			}
			c.change(cur)
			err := op.Update(ctx, cur)
			switch {
			case c.allowed && err != nil:
				t.Errorf("update: %v, want allowed", err)
			case !c.allowed && (err == nil || !strings.Contains(err.Error(), "only the caBundle")):
				t.Errorf("update: %v, want a refusal by troupe-operator-guard", err)
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

// notOptedIn: with the operator's token, every kind of child of a troupe job (labelled as
// troupe's, controlled by a troupe job) is refused in a namespace no admin opted in, naming
// the label and the command, and admitted in one opted in; a troupe pod there is not deleted.
// What tells a job why it gets nothing is let through everywhere: its status and events.
func notOptedIn(ctx context.Context, t *testing.T, op client.Client) {
	owner := metav1.OwnerReference{APIVersion: troupev1.GroupVersion.String(), Kind: "MPIJob", Name: "x",
		UID: types.UID("uid-of-x"), Controller: ptr.To(true)}
	childMeta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: map[string]string{troupev1.LabelManagedBy: troupev1.ManagedByTroupe,
			troupev1.LabelJobUID: "uid-of-x"}, OwnerReferences: []metav1.OwnerReference{owner}}
	}
	pod := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "miner:1"}}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{troupev1.LabelJobUID: "uid-of-x"}}
	children := []client.Object{
		&batchv1.Job{ObjectMeta: childMeta("x-launcher"), Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: pod}}},
		&appsv1.StatefulSet{ObjectMeta: childMeta("x-worker"), Spec: appsv1.StatefulSetSpec{Selector: selector,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: selector.MatchLabels},
				Spec: corev1.PodSpec{Containers: pod.Containers}}}},
		&corev1.Service{ObjectMeta: childMeta("x"), Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: selector.MatchLabels}},
		&corev1.ConfigMap{ObjectMeta: childMeta("x-mpi"), Data: map[string]string{"hostfile": "x-worker-0"}},
		&corev1.Secret{ObjectMeta: childMeta("x-ssh"), Type: corev1.SecretTypeOpaque},
		&corev1.ServiceAccount{ObjectMeta: childMeta("x-exec")},
		execRole("y-exec", "y", "y-worker-0"),
		&rbacv1.RoleBinding{ObjectMeta: childMeta("x-exec"),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "x-exec"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "x-exec"}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: childMeta("x"), Spec: policyv1.PodDisruptionBudgetSpec{Selector: selector,
			MinAvailable: ptr.To(intstr.FromInt32(1))}},
		&networkingv1.NetworkPolicy{ObjectMeta: childMeta("x"), Spec: networkingv1.NetworkPolicySpec{PodSelector: *selector}},
		&corev1.PersistentVolumeClaim{ObjectMeta: childMeta("x-data"), Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
	}
	// The RoleBinding's Role: RBAC refuses to bind a Role that does not exist before admission.
	for _, ns := range []string{closed, tenant} {
		role := execRole("x-exec", "x", "x-worker-0")
		role.Namespace = ns
		if err := k8s.Create(ctx, role); err != nil {
			t.Fatal(err)
		}
	}
	for _, child := range children {
		for _, ns := range []string{closed, tenant} {
			obj := child.DeepCopyObject().(client.Object)
			obj.SetNamespace(ns)
			if b, ok := obj.(*rbacv1.RoleBinding); ok {
				b.Subjects[0].Namespace = ns
			}
			kind := fmt.Sprintf("%T", child)
			t.Run(fmt.Sprintf("%s in %s", kind[strings.LastIndex(kind, ".")+1:], ns), func(t *testing.T) {
				err := op.Create(ctx, obj, client.DryRunAll)
				switch ns {
				case tenant:
					if err != nil {
						t.Errorf("a troupe job's child in a namespace opted in: %v, want admitted", err)
					}
				default:
					want := "kubectl label namespace " + ns + " troupe.dev/jobs=enabled"
					if err == nil || !strings.Contains(err.Error(), "troupe-operator-guard") || !strings.Contains(err.Error(), want) {
						t.Errorf("create in %s: %v, want a refusal by troupe-operator-guard saying %q", ns, err, want)
					}
				}
			})
		}
	}

	// A pod of a troupe job in the closed namespace: the operator may not delete it.
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x-worker-0", Namespace: closed,
		Labels: map[string]string{troupev1.LabelJobUID: "uid-of-x"}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "worker:1"}}}}
	if err := k8s.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if err := op.Delete(ctx, victim); err == nil || !strings.Contains(err.Error(), "not (no label troupe.dev/jobs=enabled)") {
		t.Errorf("delete a troupe pod in %s: %v, want a refusal by troupe-operator-guard", closed, err)
	}

	// A job created while its namespace was opted in, the label then taken off: the operator
	// still writes its status and events, which is how its user learns why nothing is made.
	const was = "was-open"
	wasNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: was, Labels: optedIn}}
	if err := k8s.Create(ctx, wasNS); err != nil {
		t.Fatal(err)
	}
	job := testutil.MakeChainerJob("left", was).Obj()
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Patch(ctx, wasNS, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"troupe.dev/jobs":null}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := waitJobCreate(ctx, was, false); err != nil {
		t.Fatal(err)
	}
	before := job.DeepCopy()
	job.Status.Reason = troupev1.ReasonCreateRefused
	if err := op.Status().Patch(ctx, job, client.MergeFrom(before)); err != nil {
		t.Errorf("the operator's write of a job's status in a namespace no longer opted in: %v, want allowed", err)
	}
	event := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "left.refused", Namespace: was},
		EventTime: metav1.NowMicro(), ReportingController: "troupe.dev/operator", ReportingInstance: "troupe-operator",
		Action: "Create", Reason: troupev1.ReasonCreateRefused, Type: corev1.EventTypeWarning, Note: "refused",
		Regarding: corev1.ObjectReference{APIVersion: troupev1.GroupVersion.String(), Kind: "ChainerJob", Namespace: was, Name: job.Name, UID: job.UID}}
	if err := op.Create(ctx, event); err != nil {
		t.Errorf("the operator's event on a job in a namespace no longer opted in: %v, want allowed", err)
	}
	// The operator of the next tests would reconcile it.
	if err := k8s.Delete(ctx, job); err != nil {
		t.Error(err)
	}
}

// startOperator runs the operator's controllers with cfg until the test ends.
func startOperator(t *testing.T, cfg *rest.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cacheOpts, err := engine.CacheOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	// One manager per test, each with the kinds' controllers: their names repeat.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Cache: cacheOpts, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
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
	t.Cleanup(func() { cancel(); <-stopped })
}

// A create of the operator's that the API server refuses (here an admin's admission policy
// that holds StatefulSets back in the job's namespace) is named in the job's status
// (Initialized False, CreateRefused, status.reason) and a Warning event; once the policy is
// gone the job goes on by itself.
func TestRefusedCreateIsReported(t *testing.T) {
	ctx := context.Background()
	const ns = "held"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: optedIn}}); err != nil {
		t.Fatal(err)
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-statefulsets"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"statefulsets"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "no StatefulSets in namespace held this week"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-statefulsets"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	probe := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}, Spec: appsv1.StatefulSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probe"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe:1"}}}}}}
	testutil.Eventually(t, "the policy enforced", 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, error) {
		err := k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "this week"), nil
	})
	startOperator(t, asOperator(nil))
	job := testutil.MakeChainerJob("held", ns).WorkerSet("ws0", 1).Obj()
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	var msg string
	t.Cleanup(func() {
		if t.Failed() {
			_ = k8s.Get(ctx, client.ObjectKeyFromObject(job), job)
			t.Logf("the job's status: %+v", job.Status)
		}
	})
	testutil.Eventually(t, "the job says the create was refused", 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionInitialized)
		if c == nil || c.Reason != troupev1.ReasonCreateRefused || job.Status.Reason != troupev1.ReasonCreateRefused {
			return false, nil
		}
		msg = c.Message
		return true, nil
	})
	const workers = "held-workerset-ws0"
	if !strings.Contains(msg, "StatefulSet "+workers) || !strings.Contains(msg, "no StatefulSets in namespace held this week") {
		t.Errorf("Initialized's message %q, want the refused StatefulSet %s and the policy's words", msg, workers)
	}
	testutil.Eventually(t, "a Warning event CreateRefused", 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == job.Name && e.Reason == troupev1.ReasonCreateRefused && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, workers) {
				return true, nil
			}
		}
		return false, nil
	})
	if err := k8s.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	// The retry's backoff has grown by then: a few seconds at most in this test's time.
	testutil.Eventually(t, "the workers' StatefulSet, once the policy is gone", 100*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: workers}, &appsv1.StatefulSet{})
		return err == nil, client.IgnoreNotFound(err)
	})
	testutil.Eventually(t, "Initialized no longer CreateRefused", 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason != troupev1.ReasonCreateRefused && job.Status.Reason != troupev1.ReasonCreateRefused, nil
	})
}

// execRole is a Role named like a job's exec Role, labelled as troupe's and controlled by the
// troupe job owner, granting get and exec on pods.
func execRole(name, owner string, pods ...string) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant,
			Labels: map[string]string{troupev1.LabelManagedBy: troupev1.ManagedByTroupe},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: troupev1.GroupVersion.String(), Kind: "ChainerJob",
				Name: owner, UID: types.UID("uid-of-" + owner), Controller: ptr.To(true)}}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, ResourceNames: pods},
			{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"get", "create"}, ResourceNames: pods},
		},
	}
}

// nothingRule matches a resource no API serves: a webhook configuration that is sent nothing.
func nothingRule(resource string) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"nothing.troupe.dev"}, APIVersions: []string{"v1"}, Resources: []string{resource}},
	}
}

// The operator, as its ServiceAccount under the cluster-wide install and the guard, runs an
// SSH MPIJob (its generated Secret) and a KubeExec ChainerJob (its exec Role and RoleBinding)
// with no request refused.
func TestJobsRunUnderTheGuard(t *testing.T) {
	ctx := context.Background()
	rec := &refused{}
	startOperator(t, asOperator(rec))

	mpiJob := testutil.Load[*troupev1.MPIJob](t, "../../../examples/mpijob.yaml", tenant)
	mpiJob.Spec.Worker.Replicas = ptr.To[int32](2)
	mpiJob.Spec.Transport = troupev1.MPITransportSSH
	kx := testutil.MakeChainerJob("kx", tenant).WorkerSet("ws0", 2).Obj()
	kx.Spec.Transport = troupev1.MPITransportKubeExec
	// README's first example: a master alone over KubeExec, whose exec Role has no rules.
	solo := testutil.Load[*troupev1.ChainerJob](t, "../../../examples/chainerjob.yaml", tenant)
	solo.Spec.Transport = troupev1.MPITransportKubeExec
	// kubeflow's pi.yaml with only apiVersion changed: its SSH Secret is kubernetes.io/ssh-auth.
	pi := testutil.Load[*troupev1.MPIJob](t, "../../../test/manifests/kubeflow/pi.yaml", tenant)
	pi.TypeMeta = metav1.TypeMeta{}
	for _, job := range []client.Object{mpiJob, kx, pi, solo} {
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
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pi-ssh"}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi-launcher"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "example-job-exec"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "example-job-exec"}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "example-job-master"}},
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

// kubectl runs the cluster's kubectl as an admin (system:masters) and returns its output,
// stderr included, and its error.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	admin, err := testEnv.AddUser(envtest.User{Name: "kubectl-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := admin.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := k.Run(args...)
	out, _ := io.ReadAll(stdout)
	errOut, _ := io.ReadAll(stderr)
	return string(out) + string(errOut), err
}

// A user's kubectl create of a job in a namespace no admin opted in is refused at admission,
// naming the label and the command that sets it, for every kind; an existing job there (its
// namespace's label taken off after it was created) is still updated, annotated and deleted;
// once the namespace is labelled, the create goes through.
func TestJobCreateNeedsANamespaceOptedIn(t *testing.T) {
	ctx := context.Background()
	const ns = "team-b"
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: optedIn}}
	if err := k8s.Create(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	example := filepath.Join("..", "..", "..", "examples", "chainerjob.yaml")
	if out, err := kubectl(t, "create", "-n", ns, "-f", example); err != nil {
		t.Fatalf("kubectl create in a namespace opted in: %v\n%s", err, out)
	}
	if err := k8s.Patch(ctx, nsObj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"troupe.dev/jobs":null}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := waitJobCreate(ctx, ns, false); err != nil {
		t.Fatal(err)
	}

	want := ns + ` is not (no label troupe.dev/jobs=enabled): kubectl label namespace ` + ns + ` troupe.dev/jobs=enabled`
	for _, f := range []string{"chainerjob-mn.yaml", "mpijob.yaml", "horovodjob.yaml", "pytorchjob.yaml"} {
		out, err := kubectl(t, "create", "-n", ns, "-f", filepath.Join("..", "..", "..", "examples", f))
		if err == nil || !strings.Contains(out, "troupe-job-namespaces") || !strings.Contains(out, want) {
			t.Errorf("kubectl create -f examples/%s in %s: %v, want refused by troupe-job-namespaces saying %q:\n%s", f, ns, err, want, out)
		} else if f == "mpijob.yaml" {
			t.Logf("$ kubectl create -n %s -f examples/%s\n%s", ns, f, out)
		}
	}
	// The job created before the label went: changes of its spec and metadata, and its delete.
	for _, args := range [][]string{
		{"patch", "chainerjob", "example-job", "--type=merge", "-p", `{"spec":{"runPolicy":{"backoffLimit":2}}}`},
		{"annotate", "chainerjob", "example-job", "team=b"},
		{"label", "chainerjob", "example-job", "stage=test"},
		{"delete", "chainerjob", "example-job"},
	} {
		if out, err := kubectl(t, append([]string{"-n", ns}, args...)...); err != nil {
			t.Errorf("kubectl %s of a job in a namespace no longer opted in: %v, want allowed\n%s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := kubectl(t, "label", "namespace", ns, "troupe.dev/jobs=enabled"); err != nil {
		t.Fatalf("kubectl label namespace: %v\n%s", err, out)
	}
	if err := waitJobCreate(ctx, ns, true); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(t, "create", "-n", ns, "-f", example); err != nil {
		t.Errorf("kubectl create once the namespace is labelled: %v\n%s", err, out)
	}
}

// A job in a namespace whose label was taken off after it was created gets nothing from the
// operator (under its ServiceAccount, with the guard), and says why: Initialized False and
// status.reason CreateRefused, naming the label and the command, and a Warning event. Once the
// namespace is opted in again, it goes on by itself.
func TestJobInANamespaceNotOptedInSaysWhy(t *testing.T) {
	ctx := context.Background()
	const ns = "unlabelled-later"
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: optedIn}}
	if err := k8s.Create(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	job := testutil.MakeChainerJob("stranded", ns).WorkerSet("ws0", 1).Obj()
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Patch(ctx, nsObj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"troupe.dev/jobs":null}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := waitJobCreate(ctx, ns, false); err != nil {
		t.Fatal(err)
	}
	startOperator(t, asOperator(nil))
	t.Cleanup(func() {
		if t.Failed() {
			_ = k8s.Get(ctx, client.ObjectKeyFromObject(job), job)
			t.Logf("the job's status: %+v", job.Status)
		}
	})
	const want = "kubectl label namespace " + ns + " troupe.dev/jobs=enabled"
	var msg string
	testutil.Eventually(t, "the job says the create was refused", 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionInitialized)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != troupev1.ReasonCreateRefused || job.Status.Reason != troupev1.ReasonCreateRefused {
			return false, nil
		}
		msg = c.Message
		return true, nil
	})
	if !strings.Contains(msg, "troupe-operator-guard") || !strings.Contains(msg, want) {
		t.Errorf("Initialized's message %q, want the guard's refusal saying %q", msg, want)
	}
	t.Logf("Initialized=False CreateRefused: %s", msg)
	testutil.Eventually(t, "a Warning event CreateRefused naming the label", 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == job.Name && e.Reason == troupev1.ReasonCreateRefused && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, want) {
				return true, nil
			}
		}
		return false, nil
	})
	for _, l := range []client.ObjectList{&appsv1.StatefulSetList{}, &batchv1.JobList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}} {
		if err := k8s.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if meta.LenList(l) > 0 {
			t.Errorf("%T in %s not opted in: %d, want none", l, ns, meta.LenList(l))
		}
	}

	if err := k8s.Patch(ctx, nsObj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"troupe.dev/jobs":"enabled"}}}`))); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the workers' StatefulSet, once the namespace is opted in", 100*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stranded-workerset-ws0"}, &appsv1.StatefulSet{})
		return err == nil, client.IgnoreNotFound(err)
	})
	testutil.Eventually(t, "Initialized no longer CreateRefused", 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason != troupev1.ReasonCreateRefused && job.Status.Reason != troupev1.ReasonCreateRefused, nil
	})
}

// Every job manifest users bring (examples/, kubeflow's and training-operator's published jobs
// and the seed documents', those with only their apiVersion changed: testutil.UserManifests,
// found by glob), each created in a namespace opted in, is worked on by the operator as its
// ServiceAccount under the guard with no request refused: each job's Initialized condition is
// there and none is CreateRefused. (Whether the job then runs is the real node's: there is no
// kubelet here.)
func TestEveryManifestRunsUnderTheGuard(t *testing.T) {
	ctx := context.Background()
	rec := &refused{}
	startOperator(t, asOperator(rec))
	served := map[string]bool{}
	for _, k := range kinds.All() {
		served[k.Name] = true
	}
	manifests, err := testutil.UserManifests(filepath.Join("..", "..", ".."), func(kind string) bool { return served[kind] })
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]*unstructured.Unstructured, len(manifests))
	for i, m := range manifests {
		ns := fmt.Sprintf("manifest-%d", i)
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: optedIn}}); err != nil {
			t.Fatal(err)
		}
		jobs[i] = &unstructured.Unstructured{Object: m.Object}
		jobs[i].SetNamespace(ns)
		if err := k8s.Create(ctx, jobs[i]); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
	}
	created := 0
	for i, m := range manifests {
		var reason string
		testutil.Eventually(t, m.Name+" worked on", 100*time.Millisecond, 60*time.Second, func(ctx context.Context) (bool, error) {
			job := &unstructured.Unstructured{}
			job.SetGroupVersionKind(jobs[i].GroupVersionKind())
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(jobs[i]), job); err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(job.Object, "status", "conditions")
			for _, c := range conds {
				if c, ok := c.(map[string]any); ok && c["type"] == troupev1.ConditionInitialized {
					reason = fmt.Sprint(c["reason"])
					return reason != troupev1.ReasonCreatingChildren, nil
				}
			}
			return false, nil
		})
		switch reason {
		case troupev1.ReasonCreateRefused:
			t.Errorf("%s: %s", m.Name, reason)
		case troupev1.ReasonChildrenCreated:
			created++
		default:
			t.Logf("%s: Initialized %s (not the guard's doing)", m.Name, reason)
		}
	}
	t.Logf("%d manifests, %d with every child created as the operator's ServiceAccount under the guard", len(manifests), created)
	if got := rec.all(); len(got) > 0 {
		t.Errorf("requests of the operator refused: %q", got)
	}
}
