package engine

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// laggingCache is the manager's client over an API server whose cache has not brought in
// everything yet: reads come from the cache, writes go to the API server.
type laggingCache struct {
	client.Client // the API server
	cache         client.Reader
}

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.cache.Get(ctx, key, obj, opts...)
}

func (c laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.cache.List(ctx, list, opts...)
}

// chainerJobGVK is the kind masterOnlyAdapter's jobs are, for their owner references.
var chainerJobGVK = schema.GroupVersionKind{Group: "troupe.dev", Version: "v1alpha1", Kind: "ChainerJob"}

// reconcileOverLaggingCache runs one pass over job, new and in the cache, with onlyOnAPIServer
// existing on the API server but not (yet) in the cache, and returns the API server.
func reconcileOverLaggingCache(t *testing.T, job *troupev1.ChainerJob, onlyOnAPIServer client.Object) client.Client {
	t.Helper()
	cache, apiServer := fakeJobClient(t, job.DeepCopy()), fakeJobClient(t, job.DeepCopy(), onlyOnAPIServer)
	r := &Reconciler{deferred: newDeferredWrites(0), podCreates: newPodCreatePace(),
		client: laggingCache{Client: apiServer, cache: cache}, apiReader: apiServer,
		recorder: events.NewFakeRecorder(100), adapter: masterOnlyAdapter{}, gvk: chainerJobGVK,
		clock: clocktesting.NewFakePassiveClock(metav1.Now().Time),
	}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return apiServer
}

// A new job's Service is created without a read first (readThrough). When the job's own
// Service exists already but the cache has not brought it in (a pass that runs right after the
// one that created it), the create finds the name taken, reads it and goes on with it: no
// error, no conflict, the same Service, and the rest of the job's children created.
func TestCreateFindsTheJobsOwnChildTheCacheLacks(t *testing.T) {
	ctx := context.Background()
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	own := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Name: "train", Namespace: "ml", UID: "svc-1",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, chainerJobGVK)},
	}}
	apiServer := reconcileOverLaggingCache(t, job, own)

	var got troupev1.ChainerJob
	if err := apiServer.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Initialized = %+v, want True (the Service is the job's own)", c)
	}
	var svc corev1.Service
	if err := apiServer.Get(ctx, client.ObjectKeyFromObject(own), &svc); err != nil || svc.UID != own.UID {
		t.Errorf("the job's Service: UID %q, err %v; want the same Service %q", svc.UID, err, own.UID)
	}
	if err := apiServer.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "train-master"}, &batchv1.Job{}); err != nil {
		t.Errorf("the master Job after the Service: %v", err)
	}
}

// A foreign Service with the name of a new job's Service, which the cache does not hold (it
// carries none of troupe's labels): the create finds the name taken by someone else. The job
// reports the conflict, and nothing after the Service is created: not the master Job.
func TestCreateFindsAForeignObject(t *testing.T) {
	ctx := context.Background()
	job := &troupev1.ChainerJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-1"}}
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "theirs"}}
	apiServer := reconcileOverLaggingCache(t, job, foreign)
	var got troupev1.ChainerJob
	if err := apiServer.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized); c == nil || c.Reason != troupev1.ReasonChildConflict {
		t.Errorf("Initialized = %+v, want reason %s", c, troupev1.ReasonChildConflict)
	}
	var jobs batchv1.JobList
	if err := apiServer.List(ctx, &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 0 {
		t.Errorf("master Job %s created while the Service's name is taken", jobs.Items[0].Name)
	}
	var svc corev1.Service
	if err := apiServer.Get(ctx, client.ObjectKeyFromObject(foreign), &svc); err != nil || len(svc.OwnerReferences) != 0 {
		t.Errorf("the foreign Service: owners %v, err %v; want it untouched", svc.OwnerReferences, err)
	}
}
