// Package leastprivilege runs the operator on a real kube-apiserver under the namespace-scoped
// install's RBAC (config/namespaced, rendered with kustomize and applied as it ships), as its
// ServiceAccount (impersonated), and records every request it makes: jobs must run in the
// watched namespace with no request refused, the operator must not reach other namespaces, and
// its cache must hold only troupe's own Secrets, metadata only.
package leastprivilege

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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

const (
	// operatorNS and watched are the namespaces config/namespaced installs into and watches.
	operatorNS = "troupe-system"
	watched    = "troupe-jobs"
	// unwatched has jobs too; the operator must never reach into it.
	unwatched = "elsewhere"

	pollInterval = 100 * time.Millisecond
	waitTimeout  = 30 * time.Second
)

var (
	// k8s is the cluster admin's uncached client: tests see the API server's truth.
	k8s      client.Client
	adminCfg *rest.Config
	scheme   = runtime.NewScheme()
	// kubeVersion is the API server's: the tests write a Job's status as its controller does.
	kubeVersion *version.Version
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run these tests with `make test-integration`")
		return 1
	}
	level := zapcore.ErrorLevel
	if os.Getenv("TROUPE_TEST_VERBOSE") != "" {
		level = zapcore.Level(-2)
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(level)))
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := troupev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "config", "crds")},
		ErrorIfCRDPathMissing: true,
		// A loaded machine may take longer than the default 10 s to serve the CRDs.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: time.Minute},
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		_ = env.Stop()
		return 1
	}
	defer func() { _ = env.Stop() }()
	adminCfg = cfg
	if kubeVersion, err = testutil.KubeVersion(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "API server version:", err)
		return 1
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	if err := install(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "install config/namespaced:", err)
		return 1
	}
	return m.Run()
}

// install applies what `kubectl apply -k config/namespaced` would, as the cluster admin, after
// creating the namespaces the install expects to exist, both opted in to troupe jobs (the
// unwatched one too: what keeps the operator out of it is RBAC). There is no kubelet here, so the
// operator's Deployment is left out (the test runs the operator in-process), and the webhook
// configurations get no rules (nothing serves them; the operator only keeps their CA).
func install(ctx context.Context) error {
	for _, ns := range []string{watched, unwatched} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{troupev1.LabelJobsNamespace: troupev1.JobsNamespaceEnabled}}}); err != nil {
			return err
		}
	}
	return testutil.ApplyKustomization(ctx, k8s, filepath.Join("..", "..", "..", "config", "namespaced"), func(obj *unstructured.Unstructured) bool {
		switch obj.GetKind() {
		case "Deployment":
			return false
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
			for _, h := range hooks {
				delete(h.(map[string]any), "rules")
			}
			_ = unstructured.SetNestedSlice(obj.Object, hooks, "webhooks")
		}
		return true
	})
}

// asOperator is the admin's config turned into the operator's ServiceAccount's, with every
// request it makes recorded.
func asOperator(rec *recorder) *rest.Config {
	cfg := testutil.AsServiceAccount(adminCfg, operatorNS, "troupe-operator")
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return recordingTransport{next: rt, rec: rec} })
	return cfg
}

// request is one request the operator made and the API server's answer.
type request struct {
	method, path, query, accept string
	status                      int
}

func (r request) String() string {
	return fmt.Sprintf("%s %s?%s (Accept %s): %d", r.method, r.path, r.query, r.accept, r.status)
}

// isListOrWatch reports whether the request reads a collection of resource (plural name).
func (r request) isListOrWatch(resource string) bool {
	return r.method == http.MethodGet && strings.HasSuffix(r.path, "/"+resource)
}

type recorder struct {
	mu       sync.Mutex
	requests []request
}

func (r *recorder) all() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.requests...)
}

type recordingTransport struct {
	next http.RoundTripper
	rec  *recorder
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	got := request{method: req.Method, path: req.URL.Path, query: req.URL.RawQuery, accept: req.Header.Get("Accept")}
	if resp != nil {
		got.status = resp.StatusCode
	}
	t.rec.mu.Lock()
	t.rec.requests = append(t.rec.requests, got)
	t.rec.mu.Unlock()
	return resp, err
}

// eventually polls cond until it returns true or the timeout passes; the last error explains a
// failure.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	testutil.Eventually(t, what, pollInterval, waitTimeout, cond)
}

// waitFor waits until the named object exists and returns it.
func waitFor[T client.Object](t *testing.T, obj T, ns, name string) T {
	t.Helper()
	eventually(t, fmt.Sprintf("%T %s/%s", obj, ns, name), func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		return err == nil, err
	})
	return obj
}
