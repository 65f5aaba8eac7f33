// Package admission runs troupe's admission webhooks, served by the operator's manager, behind a
// real kube-apiserver (envtest installs config/webhook with a local URL and certificates), and
// checks what users see from kubectl create: every bad spec refused with its field path, every
// example admitted and defaulted, updates refused or allowed.
package admission

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/webhooks"
)

var (
	k8s    client.Client
	scheme = runtime.NewScheme()
	// restConfig reaches the test API server, for clients of a test's own.
	restConfig *rest.Config
	// testEnv is the running API server, for kubectl users of the tests' own.
	testEnv *envtest.Environment
)

// defaultGang stands for the operator's --default-gang flag in these tests.
const defaultGang = troupev1.GangNone

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run these tests with `make test-integration`")
		return 1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.ErrorLevel)))
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := troupev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crds")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "webhook")}},
	}
	cfg, err := env.Start()
	if err != nil {
		// Start can fail after it started etcd and kube-apiserver (a CRD the API server
		// refuses): stop what it started, or they outlive the test.
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		_ = env.Stop()
		return 1
	}
	defer func() { _ = env.Stop() }()
	testEnv = env

	wo := &env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir,
		}),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	if err := kinds.SetupWebhooks(mgr, webhooks.Options{DefaultGang: defaultGang}); err != nil {
		fmt.Fprintln(os.Stderr, "webhooks:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
		}
	}()
	defer func() { cancel(); <-stopped }()
	// The API server reaches the webhooks once their server answers.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return mgr.GetWebhookServer().StartedChecker()(nil) == nil, nil
	}); err != nil {
		fmt.Fprintln(os.Stderr, "webhook server did not start:", err)
		return 1
	}
	restConfig = cfg
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	return m.Run()
}
