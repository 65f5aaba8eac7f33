package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func TestChildWakeups(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(troupev1.GroupVersion.WithKind("MPIJob"), meta.RESTScopeNamespace)
	h := childWakeups{
		EventHandler: handler.EnqueueRequestForOwner(fakeJobClient(t).Scheme(), mapper, &troupev1.MPIJob{}, handler.OnlyControllerOwner()),
		delay:        time.Second,
	}
	pi := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ml", Name: "pi"}}
	owned := metav1.ObjectMeta{Name: "pi-worker", Namespace: "ml", Generation: 1, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: troupev1.GroupVersion.String(), Kind: "MPIJob", Name: "pi", UID: "u1", Controller: ptr.To(true),
	}}}
	sts := func(change func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: *owned.DeepCopy(), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](8)},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 8, ReadyReplicas: 3}}
		if change != nil {
			change(s)
		}
		return s
	}
	job := func(change func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: *owned.DeepCopy(), Status: batchv1.JobStatus{Active: 1, Ready: ptr.To[int32](0)}}
		j.Name = "pi-worker-0"
		j.Labels = map[string]string{troupev1.LabelRole: troupev1.RoleWorker, troupev1.LabelWorkerSet: "worker"}
		if change != nil {
			change(j)
		}
		return j
	}
	master := func(change func(*batchv1.Job)) *batchv1.Job {
		return job(func(j *batchv1.Job) {
			j.Name = "pi-launcher"
			j.Labels = map[string]string{troupev1.LabelRole: troupev1.RoleMaster}
			if change != nil {
				change(j)
			}
		})
	}
	ctx := context.Background()

	for name, update := range map[string]event.UpdateEvent{
		"a StatefulSet's ready count": {ObjectOld: sts(nil), ObjectNew: sts(func(s *appsv1.StatefulSet) { s.Status.ReadyReplicas = 4; s.Status.AvailableReplicas = 4 })},
		"a StatefulSet's pods, more":  {ObjectOld: sts(nil), ObjectNew: sts(func(s *appsv1.StatefulSet) { s.Status.Replicas = 9 })},
		"a Job's ready count":         {ObjectOld: job(nil), ObjectNew: job(func(j *batchv1.Job) { j.Status.Ready = ptr.To[int32](1) })},
		"a Job's start and active pods": {ObjectOld: job(nil), ObjectNew: job(func(j *batchv1.Job) {
			j.Status.StartTime = &metav1.Time{Time: time.Unix(5, 0)}
			j.Status.Active = 2
		})},
		// Its pod's end woke the job already (podWakeups).
		"a master Job's pod counted gone": {ObjectOld: master(nil), ObjectNew: master(func(j *batchv1.Job) { j.Status.Active = 0 })},
		"a master Job's pod counted succeeded": {ObjectOld: master(func(j *batchv1.Job) { j.Status.Active = 0 }), ObjectNew: master(func(j *batchv1.Job) {
			j.Status.Active, j.Status.Succeeded = 0, 1
		})},
	} {
		t.Run(name+" wakes the job a moment later, once", func(t *testing.T) {
			q, clock := newQueue(t)
			h.Update(ctx, update, q)
			h.Update(ctx, update, q)
			if q.Len() != 0 {
				t.Fatalf("the child's progress woke its job at once (%d queued)", q.Len())
			}
			stepUntilQueued(t, clock, q, time.Second)
			queuedOnce(t, q, pi)
		})
	}

	for name, update := range map[string]event.UpdateEvent{
		"a StatefulSet counting fewer pods": {ObjectOld: sts(nil), ObjectNew: sts(func(s *appsv1.StatefulSet) { s.Status.Replicas = 7 })},
		"a StatefulSet's controller seeing a new spec": {ObjectOld: sts(func(s *appsv1.StatefulSet) { s.Generation = 2 }),
			ObjectNew: sts(func(s *appsv1.StatefulSet) { s.Generation = 2; s.Status.ObservedGeneration = 2 })},
		"a StatefulSet's spec":   {ObjectOld: sts(nil), ObjectNew: sts(func(s *appsv1.StatefulSet) { s.Generation = 2; s.Spec.Replicas = ptr.To[int32](0) })},
		"a StatefulSet deleting": {ObjectOld: sts(nil), ObjectNew: sts(func(s *appsv1.StatefulSet) { s.DeletionTimestamp = &metav1.Time{Time: time.Unix(9, 0)} })},
		"a StatefulSet relabelled": {ObjectOld: sts(nil), ObjectNew: sts(func(s *appsv1.StatefulSet) {
			s.Labels = map[string]string{"troupe.dev/attempt": "2"}
		})},
		"a Job complete": {ObjectOld: job(nil), ObjectNew: job(func(j *batchv1.Job) {
			j.Status.Active, j.Status.Succeeded = 0, 1
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		})},
		"a Job's pod counted failed":        {ObjectOld: job(nil), ObjectNew: job(func(j *batchv1.Job) { j.Status.Failed = 1 })},
		"a master Job's pod counted failed": {ObjectOld: master(nil), ObjectNew: master(func(j *batchv1.Job) { j.Status.Failed = 1 })},
		"a worker Job's pod counted gone":   {ObjectOld: job(nil), ObjectNew: job(func(j *batchv1.Job) { j.Status.Active = 0 })},
		"a worker Job's pod counted succeeded": {ObjectOld: job(nil), ObjectNew: job(func(j *batchv1.Job) {
			j.Status.Active, j.Status.Succeeded = 0, 1
		})},
		"a master Job complete": {ObjectOld: master(func(j *batchv1.Job) { j.Status.Active = 0 }), ObjectNew: master(func(j *batchv1.Job) {
			j.Status.Active, j.Status.Succeeded = 0, 1
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		})},
		"a Job's condition, any": {ObjectOld: job(nil), ObjectNew: job(func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}
		})},
		"a Job's completion time":      {ObjectOld: job(nil), ObjectNew: job(func(j *batchv1.Job) { j.Status.CompletionTime = &metav1.Time{Time: time.Unix(9, 0)} })},
		"a Job suspended (its spec)":   {ObjectOld: job(nil), ObjectNew: job(func(j *batchv1.Job) { j.Generation = 2; j.Spec.Suspend = ptr.To(true) })},
		"a Job given another owner":    {ObjectOld: job(nil), ObjectNew: job(func(j *batchv1.Job) { j.OwnerReferences[0].Controller = nil })},
		"a Job's annotations replaced": {ObjectOld: job(nil), ObjectNew: job(func(j *batchv1.Job) { j.Annotations = map[string]string{"a": "b"} })},
	} {
		t.Run(name+" wakes the job at once", func(t *testing.T) {
			q, _ := newQueue(t)
			h.Update(ctx, update, q)
			queuedOnce(t, q, pi)
		})
	}

	// The Job controller's verdict on a master is its job's (masterVerdict): a burst of them
	// queued behind other jobs' passes made the status lag (endPriority).
	for name, verdict := range map[string]batchv1.JobConditionType{"complete": batchv1.JobComplete, "failed": batchv1.JobFailed} {
		t.Run("on the manager's queue, a Job "+name+" goes ahead of the jobs already queued", func(t *testing.T) {
			q := newManagerQueue(t)
			for _, other := range []string{"a", "b"} {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ml", Name: other}})
			}
			older := master(func(j *batchv1.Job) { j.ResourceVersion = "1" })
			h.Update(ctx, event.UpdateEvent{ObjectOld: older, ObjectNew: master(func(j *batchv1.Job) {
				j.ResourceVersion = "2"
				j.Status.Conditions = []batchv1.JobCondition{{Type: verdict, Status: corev1.ConditionTrue}}
			})}, q)
			h.Update(ctx, event.UpdateEvent{ObjectOld: older, ObjectNew: master(func(j *batchv1.Job) {
				j.Name, j.OwnerReferences[0].Name = "c-launcher", "c"
				j.ResourceVersion = "2"
				j.Status.Failed = 1 // counted, no verdict yet: in its turn
			})}, q)
			if order, want := passOrder(t, q, 4), []string{"pi", "a", "b", "c"}; !slices.Equal(order, want) {
				t.Errorf("passes in the order %v, want %v", order, want)
			}
		})
	}

	t.Run("a child created or deleted wakes the job at once", func(t *testing.T) {
		q, _ := newQueue(t)
		h.Create(ctx, event.CreateEvent{Object: sts(nil)}, q)
		queuedOnce(t, q, pi)
		h.Delete(ctx, event.DeleteEvent{Object: job(nil)}, q)
		queuedOnce(t, q, pi)
	})
	t.Run("a child of no job wakes nothing", func(t *testing.T) {
		q, clock := newQueue(t)
		foreign := func(s *appsv1.StatefulSet) { s.OwnerReferences = nil }
		h.Create(ctx, event.CreateEvent{Object: sts(foreign)}, q)
		h.Update(ctx, event.UpdateEvent{ObjectOld: sts(foreign), ObjectNew: sts(func(s *appsv1.StatefulSet) { foreign(s); s.Status.ReadyReplicas = 8 })}, q)
		clock.Step(time.Second)
		if q.Len() != 0 {
			t.Errorf("%d jobs queued for a StatefulSet of none", q.Len())
		}
	})
}
