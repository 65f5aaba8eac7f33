// Package kueuediscovery runs the operator's manager, webhooks and Kueue integration as
// cmd/troupe-operator wires them, behind a real kube-apiserver that serves no Kueue API at
// first: a job labelled kueue.x-k8s.io/queue-name is held suspended and says why, and once
// Kueue's CRDs are installed the operator finds them without a restart and queues the job.
// It has an API server of its own because it installs Kueue's CRDs mid-test.
package kueuediscovery

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/pkg/queue/kueue"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
	"github.com/troupe-dev/troupe/webhooks"
)

var (
	k8s    client.Client
	scheme = runtime.NewScheme()
)

// discoveryInterval is the operator's --kueue-discovery-interval in this test.
const discoveryInterval = time.Second

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run these tests with `make test-integration`")
		return 1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.ErrorLevel)))
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, troupev1.AddToScheme, kueuev1.AddToScheme, apiextv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "config", "crds")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join("..", "..", "..", "config", "webhook")}},
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		_ = env.Stop()
		return 1
	}
	defer func() { _ = env.Stop() }()

	integration, err := kueue.NewIntegration(cfg, discoveryInterval)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Kueue discovery:", err)
		return 1
	}
	if integration.Served() {
		fmt.Fprintln(os.Stderr, "the test API server serves Kueue's API before the test installs it")
		return 1
	}
	cacheOpts, err := engine.CacheOptions(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cache options:", err)
		return 1
	}
	wo := &env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Cache: cacheOpts, Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir}),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	opts := controllers.Options{AgentImage: "troupe-agent:test"}
	if err := kinds.SetupWebhooks(mgr, webhooks.Options{DefaultGang: troupev1.GangNone}); err != nil {
		fmt.Fprintln(os.Stderr, "webhooks:", err)
		return 1
	}
	if err := kinds.SetupControllers(mgr, opts); err != nil {
		fmt.Fprintln(os.Stderr, "controllers:", err)
		return 1
	}
	for _, k := range kinds.All() {
		if err := kueue.Setup(mgr, k.Adapter(opts), integration); err != nil {
			fmt.Fprintln(os.Stderr, "Kueue integration:", err)
			return 1
		}
	}
	if err := mgr.Add(integration); err != nil {
		fmt.Fprintln(os.Stderr, "Kueue discovery:", err)
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
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	return m.Run()
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	testutil.Eventually(t, what, 100*time.Millisecond, 60*time.Second, cond)
}

// A queued job in a cluster without Kueue is held, not run; Kueue installed later queues it.
func TestQueuedJobWaitsForKueue(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kueue-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	job := testutil.MakeChainerJob("queued", ns.Name).WorkerSet("ws0", 2).Obj()
	job.Labels = map[string]string{troupev1.LabelQueueName: "lq"}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(job.Spec.RunPolicy.Suspend, false) {
		t.Fatalf("the queued job was stored with suspend %v, want true", job.Spec.RunPolicy.Suspend)
	}

	// Held, saying why, with no master Job: nothing runs outside the quota it names. The
	// Kueue integration writes the condition and the engine the phase, each in its own write.
	eventually(t, "Admitted False, reason KueueNotInstalled, phase Suspended", func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionAdmitted)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == troupev1.ReasonKueueNotInstalled &&
			strings.Contains(c.Message, "lq") && strings.Contains(c.Message, kueue.MinimumVersion) &&
			job.Status.Phase == troupev1.JobSuspended, nil
	})
	t.Logf("held: %s", meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionAdmitted).Message)
	master := &batchv1.Job{}
	err := k8s.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "queued-master"}, master)
	if err == nil && ptr.Deref(master.Spec.Suspend, false) == false {
		t.Errorf("the held job's master Job runs")
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}

	installKueueCRDs(t)
	eventually(t, "the job queued in LocalQueue lq with a Workload", func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionAdmitted)
		if c == nil || c.Reason != troupev1.ReasonQueued || !strings.Contains(c.Message, "waiting in LocalQueue lq") {
			return false, nil
		}
		list := &kueuev1.WorkloadList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns.Name)); err != nil {
			return false, err
		}
		return len(list.Items) == 1 && metav1.IsControlledBy(&list.Items[0], job), nil
	})
	t.Logf("queued: %s", meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionAdmitted).Message)
	if !ptr.Deref(job.Spec.RunPolicy.Suspend, false) {
		t.Error("the job was resumed before Kueue admitted it")
	}
}

// installKueueCRDs installs the CRDs of the Kueue module troupe is built with. Kueue's own
// installation converts between its API versions with a webhook, which this API server does
// not have: the CRDs store v1beta2, the version troupe writes, so none is needed.
func installKueueCRDs(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	if err != nil {
		t.Fatalf("find the Kueue module: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "config", "components", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Kueue CRDs: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == kueuev1.GroupVersion.Version
		}
		if err := k8s.Create(context.Background(), crd); err != nil {
			t.Fatalf("install %s: %v", crd.Name, err)
		}
	}
}
