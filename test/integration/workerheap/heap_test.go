// Package workerheap measures what a PyTorchJob's fan-out costs the operator's memory: its own
// API server and operator, so no other test's objects share the heap it reads.
package workerheap

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

const (
	workers       = 500
	templateBytes = 100 << 10
	// heapBudget is what the whole job may add to the operator's live heap (issue 47): its
	// worker Jobs' templates alone are 50 MiB.
	heapBudget = 10 << 20
)

// A PyTorchJob of 500 workers whose template is 100 KiB makes 500 worker Jobs (50 MiB of
// templates in etcd), yet the operator's live heap grows by less than 10 MiB: its cache holds
// each worker Job as the outline the engine reads, and a pass builds a whole Job only when it is
// missing. Then the job is suspended: the engine, which holds the Jobs in part, patches each
// one's suspension and leaves its template as it was.
func TestWorkerJobsCostTheOperatorLittleMemory(t *testing.T) {
	scheme := apiruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := troupev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "config", "crds")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopped := startOperator(ctx, t, cfg, scheme)
	defer func() { cancel(); <-stopped }()

	before := liveHeap()
	ns := testutil.NewNamespace(t, k8s, "heap-")
	job := testutil.Load[*troupev1.PyTorchJob](t, "../../../examples/pytorchjob.yaml", ns)
	worker := job.Spec.PyTorchReplicaSpecs.Worker
	worker.Replicas = ptr.To[int32](workers)
	worker.Template.Annotations = map[string]string{"bulk": strings.Repeat("x", templateBytes)}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testutil.Eventually(t, "every worker Job made and the job initialized", time.Second, 5*time.Minute, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		made, err := workerJobs(ctx, k8s, ns)
		c := meta.FindStatusCondition(job.Status.Conditions, troupev1.ConditionInitialized)
		return err == nil && made == workers && c != nil && c.Status == metav1.ConditionTrue, err
	})
	t.Logf("%d worker Jobs of a %d KiB template made in %v", workers, templateBytes>>10, time.Since(start).Round(time.Second))
	// The heap the job keeps, not a pass's own: measured once the operator is idle (a pass
	// in flight holds its reads; one caught mid-pass read 11 MiB where an idle operator holds 5).
	lastPasses := -1.0
	testutil.Eventually(t, "the operator idle: no queued or running pass, none since the last look", 500*time.Millisecond, time.Minute,
		func(context.Context) (bool, error) {
			queued, running, passes, err := operatorWork()
			idle := err == nil && queued == 0 && running == 0 && passes == lastPasses
			lastPasses = passes
			return idle, err
		})
	grown := liveHeap() - before
	t.Logf("the operator's live heap grew by %.1f MiB (budget %d MiB)", float64(grown)/(1<<20), heapBudget>>20)
	if grown > heapBudget {
		t.Errorf("the live heap grew by %.1f MiB for one job, over %d MiB", float64(grown)/(1<<20), heapBudget>>20)
	}

	// Suspended: every worker Job is patched to suspended, its template as it was made.
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"runPolicy":{"suspend":true}}}`))
	if err := k8s.Patch(ctx, job, patch); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "every worker Job suspended, its template whole", time.Second, 2*time.Minute, func(ctx context.Context) (bool, error) {
		var list batchv1.JobList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), client.HasLabels{troupev1.LabelWorkerSet}); err != nil {
			return false, err
		}
		suspended := 0
		for _, j := range list.Items {
			if len(j.Spec.Template.Annotations["bulk"]) != templateBytes || len(j.Spec.Template.Spec.Containers) != 1 ||
				j.Spec.Template.Spec.Containers[0].Image != worker.Template.Spec.Containers[0].Image {
				return false, fmt.Errorf("worker Job %s lost its template: %d bytes of annotation, containers %v",
					j.Name, len(j.Spec.Template.Annotations["bulk"]), j.Spec.Template.Spec.Containers)
			}
			if ptr.Deref(j.Spec.Suspend, false) {
				suspended++
			}
		}
		return suspended == workers, nil
	})
}

// liveHeap is the bytes of the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// operatorWork sums, over the operator's controllers, the passes queued, those running and
// those done, from the metrics controller-runtime registers in this process.
func operatorWork() (queued, running, passes float64, err error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, 0, 0, err
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "workqueue_depth":
				queued += m.GetGauge().GetValue()
			case "controller_runtime_active_workers":
				running += m.GetGauge().GetValue()
			case "controller_runtime_reconcile_total":
				passes += m.GetCounter().GetValue()
			}
		}
	}
	return queued, running, passes, nil
}

// workerJobs counts the namespace's worker Jobs, read as metadata (the test's own memory stays
// out of the measure).
func workerJobs(ctx context.Context, k8s client.Client, ns string) (int, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
	if err := k8s.List(ctx, list, client.InNamespace(ns), client.HasLabels{troupev1.LabelWorkerSet}); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// startOperator runs the operator's manager in-process, its cache and controllers as
// cmd/troupe-operator sets them up, with room in its client's budget for 500 creates.
func startOperator(ctx context.Context, t *testing.T, cfg *rest.Config, scheme *apiruntime.Scheme) <-chan struct{} {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	cacheOpts, err := engine.CacheOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	opCfg := rest.CopyConfig(cfg)
	opCfg.QPS, opCfg.Burst = 200, 400
	mgr, err := ctrl.NewManager(opCfg, ctrl.Options{Scheme: scheme, Cache: cacheOpts, Metrics: metricsserver.Options{BindAddress: "0"}})
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
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("operator caches did not sync")
	}
	return stopped
}
