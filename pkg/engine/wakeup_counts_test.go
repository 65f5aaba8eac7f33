package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/metrics"
)

// Every watch counts the passes it asks for under the kind of object it watched, once for each
// add however its handler wraps the queue, and hands on a queue that is still the manager's
// priority queue.
func TestWakeupsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	const ns = "wakeups-unit"
	counted := func(source string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "troupe_wakeups_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["kind"] == "MPIJob" && labels["job_namespace"] == ns && labels["source"] == source {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	ctx := context.Background()
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(troupev1.GroupVersion.WithKind("MPIJob"), meta.RESTScopeNamespace)
	owner := handler.EnqueueRequestForOwner(fakeJobClient(t).Scheme(), mapper, &troupev1.MPIJob{}, handler.OnlyControllerOwner())
	ownedBy := func(job string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: job + "-x", Namespace: ns, Generation: 1, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: troupev1.GroupVersion.String(), Kind: "MPIJob", Name: job, UID: types.UID("u-" + job), Controller: ptr.To(true),
		}}}
	}

	t.Run("the job's own events", func(t *testing.T) {
		job := &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: ns}}
		p := countedJobEvents("MPIJob")
		if !p.Create(event.CreateEvent{Object: job}) || !p.Update(event.UpdateEvent{ObjectOld: job, ObjectNew: job}) {
			t.Fatal("the count filtered an event out")
		}
		if got := counted("MPIJob"); got != 2 {
			t.Errorf("the job's events counted %v times, want 2", got)
		}
	})

	t.Run("a Job's verdict, counted once and still ahead of the queued jobs", func(t *testing.T) {
		q := newManagerQueue(t)
		q.Add(req("queued-before"))
		h := countedWakeups{EventHandler: childWakeups{EventHandler: owner, delay: time.Second}, kind: "MPIJob", source: "Job"}
		master := func(rv string, conds ...batchv1.JobCondition) *batchv1.Job {
			j := &batchv1.Job{ObjectMeta: ownedBy("verdict"), Status: batchv1.JobStatus{Conditions: conds}}
			j.ResourceVersion = rv
			j.Labels = map[string]string{troupev1.LabelRole: troupev1.RoleMaster}
			return j
		}
		h.Update(ctx, event.UpdateEvent{ObjectOld: master("1"),
			ObjectNew: master("2", batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})}, q)
		if got := counted("Job"); got != 1 {
			t.Errorf("the verdict counted %v times, want 1", got)
		}
		if got := passOrder(t, q, 2); !slices.Equal(got, []string{"verdict", "queued-before"}) {
			t.Errorf("passes in the order %v: the counting queue lost the end priority", got)
		}
	})

	t.Run("a StatefulSet's progress, counted when asked though queued a moment later", func(t *testing.T) {
		q := newManagerQueue(t)
		h := countedWakeups{EventHandler: childWakeups{EventHandler: owner, delay: 50 * time.Millisecond}, kind: "MPIJob", source: "StatefulSet"}
		sts := func(ready int32) *appsv1.StatefulSet {
			return &appsv1.StatefulSet{ObjectMeta: ownedBy("progress"), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](4)},
				Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 4, ReadyReplicas: ready}}
		}
		h.Update(ctx, event.UpdateEvent{ObjectOld: sts(1), ObjectNew: sts(2)}, q)
		if got := counted("StatefulSet"); got != 1 {
			t.Errorf("the set's progress counted %v times, want 1", got)
		}
		if q.Len() != 0 {
			t.Error("the set's progress woke its job at once")
		}
		if got := passOrder(t, q, 1); !slices.Equal(got, []string{"progress"}) {
			t.Errorf("passes %v, want the set's job", got)
		}
	})

	t.Run("a node's change, one count for each job it wakes", func(t *testing.T) {
		q := newManagerQueue(t)
		h := countedWakeups{EventHandler: handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{req("on-node-a"), req("on-node-b")}
		}), kind: "MPIJob", source: "Node"}
		h.Delete(ctx, event.DeleteEvent{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, q)
		if got := counted("Node"); got != 2 {
			t.Errorf("the node counted %v times, want 2", got)
		}
		if q.Len() != 2 {
			t.Errorf("%d jobs queued, want 2", q.Len())
		}
	})

	t.Run("a plain queue is counted too", func(t *testing.T) {
		q, _ := newQueue(t)
		h := countedWakeups{EventHandler: owner, kind: "MPIJob", source: "Service"}
		h.Create(ctx, event.CreateEvent{Object: &corev1.Service{ObjectMeta: ownedBy("plain")}}, q)
		if _, ok := h.counting(q).(priorityqueue.PriorityQueue[reconcile.Request]); ok {
			t.Error("a plain queue became a priority queue")
		}
		if got := counted("Service"); got != 1 || q.Len() != 1 {
			t.Errorf("counted %v, queued %d; want 1 and 1", got, q.Len())
		}
	})
}
