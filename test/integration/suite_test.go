// Package integration runs the operator's reconcilers against a real kube-apiserver and etcd
// (envtest, binaries built from Go modules by `make envtest-assets`). There is no
// kube-controller-manager here: tests play the Job and StatefulSet controllers by writing the
// children's status themselves, and the simulated cluster (test/e2e) covers the real ones.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

var (
	// k8s is an uncached client: tests see the API server's truth, not the operator's cache.
	k8s     client.Client
	scheme  = runtime.NewScheme()
	testEnv *envtest.Environment
	// kubeVersion is the API server's: the tests write a child's status as its controllers do.
	kubeVersion *version.Version
)

const (
	// testAgentImage is the troupe-agent image the operator under test puts in launchers.
	testAgentImage = "troupe-agent:test"
	// testCoscheduler is the coscheduling scheduler name the operator under test gives pods.
	testCoscheduler = "coscheduler-test"

	pollInterval = 100 * time.Millisecond
	waitTimeout  = 30 * time.Second
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run these tests with `make test-integration`")
		return 1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(logLevel())))
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := troupev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := schedv1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}

	testEnv = &envtest.Environment{
		// Of the gang providers' CRDs only scheduler-plugins' PodGroup: Volcano stays absent,
		// as on a cluster without it.
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crds"), filepath.Join("..", "..", "hack", "controlplane", "crds", "scheduler-plugins")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := testEnv.Start()
	if err != nil {
		// Start can fail after it started etcd and kube-apiserver (a CRD the API server
		// refuses): stop what it started, or they outlive the test.
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		_ = testEnv.Stop()
		return 1
	}
	defer func() { _ = testEnv.Stop() }()
	if kubeVersion, err = testutil.KubeVersion(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "API server version:", err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := startOperator(ctx, cfg)
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "start operator:", err)
		return 1
	}
	// Stop the operator before the API server, so it does not log a dying server's errors.
	defer func() { cancel(); <-stopped }()
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	return m.Run()
}

// startOperator runs the operator's manager in-process, configured as cmd/troupe-operator
// does, and returns once its caches are in sync. The channel closes when the manager stopped.
func startOperator(ctx context.Context, cfg *rest.Config) (<-chan struct{}, error) {
	gangs, err := controllers.DiscoverGangs(cfg)
	if err != nil {
		return nil, err
	}
	cacheOpts, err := engine.CacheOptions(nil, controllers.GangTypes(gangs)...)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   cacheOpts,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return nil, err
	}
	opts := controllers.Options{
		AgentImage: testAgentImage, AvailableGangs: gangs,
		VolcanoScheduler: "volcano", CoschedulingScheduler: testCoscheduler,
	}
	if err := kinds.SetupControllers(mgr, opts); err != nil {
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
		return nil, fmt.Errorf("operator caches did not sync")
	}
	return stopped, nil
}

// logLevel keeps the operator's log to errors, so `go test` output stays readable;
// TROUPE_TEST_VERBOSE=1 shows its V(2) messages.
func logLevel() zapcore.Level {
	if os.Getenv("TROUPE_TEST_VERBOSE") != "" {
		return zapcore.Level(-2)
	}
	return zapcore.ErrorLevel
}

// newNamespace creates a namespace of its own for one test.
func newNamespace(t *testing.T) string { return testutil.NewNamespace(t, k8s, "it-") }

// eventually polls cond until it returns true or the timeout passes; the last error explains a
// failure.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	testutil.Eventually(t, what, pollInterval, waitTimeout, cond)
}
