// Package plugin runs kubectl-troupe, built from cmd/kubectl-troupe, against a real
// kube-apiserver and etcd (envtest) with the operator's reconcilers in-process, as a user runs
// it: the binary with a kubeconfig, its output read as the user reads it. There is no
// kube-controller-manager or kubelet: tests write the children's status and the pods
// themselves, as test/integration does; `logs` is covered by test/realnode.
package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
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
	repoRoot       = "../../.."
	testAgentImage = "troupe-agent:test"
	pollInterval   = 100 * time.Millisecond
	waitTimeout    = 30 * time.Second
)

var (
	// k8s is an uncached client: tests see the API server's truth; adminConfig is its
	// configuration, which tests copy to impersonate a user.
	k8s         client.Client
	adminConfig *rest.Config
	scheme      = runtime.NewScheme()
	// plugin is the built kubectl-troupe; kubeconfig names an administrator of the API server.
	plugin, kubeconfig, cacheDir string
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
	tmp, err := os.MkdirTemp("", "kubectl-troupe-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	plugin, cacheDir = filepath.Join(tmp, "kubectl-troupe"), filepath.Join(tmp, "cache")
	if out, err := exec.Command("go", "build", "-o", plugin, "-ldflags", "-X github.com/troupe-dev/troupe/pkg/version.Version=v0.0.0-it -X github.com/troupe-dev/troupe/pkg/version.Revision=0123abc", repoRoot+"/cmd/kubectl-troupe").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build kubectl-troupe: %v\n%s", err, out)
		return 1
	}

	testEnv := &envtest.Environment{CRDDirectoryPaths: []string{crdDir()}, ErrorIfCRDPathMissing: true}
	cfg, err := testEnv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		_ = testEnv.Stop()
		return 1
	}
	defer func() { _ = testEnv.Stop() }()

	admin, err := testEnv.AddUser(envtest.User{Name: "plugin-user", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "add user:", err)
		return 1
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		return 1
	}
	kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := startOperator(ctx, cfg)
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "start operator:", err)
		return 1
	}
	defer func() { cancel(); <-stopped }()
	adminConfig = cfg
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	return m.Run()
}

// crdDir is the repository's CRD directory.
func crdDir() string { return filepath.Join(repoRoot, "config", "crds") }

// startOperator runs every kind's reconciler in-process, as cmd/troupe-operator does, without
// gang providers, and returns once its caches are in sync.
func startOperator(ctx context.Context, cfg *rest.Config) (<-chan struct{}, error) {
	cacheOpts, err := engine.CacheOptions(nil)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Cache: cacheOpts, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, err
	}
	if err := kinds.SetupControllers(mgr, controllers.Options{AgentImage: testAgentImage}); err != nil {
		return nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "operator stopped:", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, errors.New("operator caches did not sync")
	}
	return stopped, nil
}

// result is what one run of the plugin printed.
type result struct {
	stdout, stderr string
	err            error
}

// troupe runs kubectl-troupe with args against the test API server.
func troupe(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, plugin, append(args, "--kubeconfig", kubeconfig, "--cache-dir", cacheDir)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// mustTroupe runs kubectl-troupe and fails the test if it fails.
func mustTroupe(t *testing.T, args ...string) string {
	t.Helper()
	r := troupe(t, args...)
	if r.err != nil {
		t.Fatalf("kubectl troupe %v: %v\n%s%s", args, r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

func newNamespace(t *testing.T) string { return testutil.NewNamespace(t, k8s, "plugin-") }

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	testutil.Eventually(t, what, pollInterval, waitTimeout, cond)
}
