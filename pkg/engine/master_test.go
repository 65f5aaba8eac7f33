package engine

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// masterOnlyAdapter describes a ChainerJob as a master alone, enough to drive the reconciler.
type masterOnlyAdapter struct{}

func (masterOnlyAdapter) NewObject() Object { return &troupev1.ChainerJob{} }
func (masterOnlyAdapter) NameLabel() string { return "chainerjob.troupe.dev/name" }
func (masterOnlyAdapter) Describe(job Object, s *Spec) error {
	s.MainContainer = "main"
	s.Master = Master{JobName: job.GetName() + "-master", Template: podTemplate("main"), BackoffLimit: 1}
	return nil
}

// trainMasterPod is a master pod of the job "train" (namespace ml, UID uid-1) in the given phase,
// as the Job controller would make it.
func trainMasterPod(phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train-master-x", Namespace: "ml", Labels: map[string]string{
			troupev1.LabelJobUID: "uid-1", troupev1.LabelRole: troupev1.RoleMaster,
		}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// A cache that lags behind must never rerun training: the job finished (its status on the API
// server says Succeeded) and its master Job was deleted since, but the cached copy still says
// Running. The reconciler re-reads the job before it creates the master Job, and creates none.
func TestStaleCacheNeverRecreatesTheMaster(t *testing.T) {
	ctx := context.Background()
	started := metav1.Now()
	job := &troupev1.ChainerJob{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"},
		Status:     troupev1.JobStatus{Phase: troupev1.JobRunning, StartTime: &started},
	}
	cache, apiServer := fakeJobClient(t, job.DeepCopy()), fakeJobClient(t, job.DeepCopy())

	// On the API server the job has finished since the cache's copy was taken.
	fresh := &troupev1.ChainerJob{}
	if err := apiServer.Get(ctx, client.ObjectKeyFromObject(job), fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Status.Phase = troupev1.JobSucceeded
	fresh.Status.CompletionTime = &started
	if err := apiServer.Status().Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}

	r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(),
		client: cache, apiReader: apiServer, recorder: events.NewFakeRecorder(100), adapter: masterOnlyAdapter{},
		gvk:   schema.GroupVersionKind{Group: "troupe.dev", Version: "v1alpha1", Kind: "ChainerJob"},
		clock: clocktesting.NewFakePassiveClock(started.Time),
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err != nil {
		t.Fatal(err)
	}
	var jobs batchv1.JobList
	if err := cache.List(ctx, &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 0 {
		t.Errorf("a master Job was created from a stale cache: %s", jobs.Items[0].Name)
	}
	// The Service (no training in it) is created as before: only the master waits.
	if err := cache.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "train"}, &corev1.Service{}); err != nil {
		t.Errorf("the job's Service: %v", err)
	}

	// Once the cache has caught up with a job that has not finished, the master is created.
	r.apiReader = cache
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err != nil {
		t.Fatal(err)
	}
	if err := cache.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "train-master"}, &batchv1.Job{}); err != nil {
		t.Errorf("master Job of an up-to-date running job: %v", err)
	}
}
