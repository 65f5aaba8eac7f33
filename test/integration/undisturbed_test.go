package integration

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// Running jobs are never disturbed by the operator. A worker StatefulSet as an older release
// wrote it (another template, another hash) is not rewritten while a pod of the job runs: the
// job reports the drift instead, and the new template is written once no pod runs. The
// StatefulSet's update strategy is OnDelete, so even a written template never rolls a pod.
func TestWorkerTemplateIsNotRewrittenWhileTheJobRuns(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	create(t, testutil.MakeChainerJob("mn", ns).WorkerSet("ws0", 1).Obj())
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "mn-workerset-ws0")
	if got := sts.Spec.UpdateStrategy.Type; got != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("worker StatefulSet updateStrategy = %q, want OnDelete", got)
	}

	// A worker pod runs.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mn-workerset-ws0-0", Namespace: ns, Labels: sts.Spec.Template.Labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "chainer", Image: "chainer:test"}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	setStatus(t, pod, func() { pod.Status.Phase = corev1.PodRunning })
	waitForJob(t, ns, "mn", "the running worker counted", func(j *troupev1.ChainerJob) bool { return j.Status.Pods.Running == 1 })

	// The StatefulSet as a previous operator release wrote it: its template and hashes differ
	// from what this release builds.
	old := func(s *appsv1.StatefulSet) {
		c := &s.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "INJECTED_BY", Value: "older-release"})
		if s.Spec.Template.Annotations == nil {
			s.Spec.Template.Annotations = map[string]string{}
		}
		s.Spec.Template.Annotations["injected-by"] = "older-release"
		s.Annotations[troupev1.AnnotationSpecHash] = "older-release"
		s.Annotations[troupev1.AnnotationTemplateHash] = "older-release"
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil {
			return err
		}
		old(sts)
		return k8s.Update(ctx, sts)
	}); err != nil {
		t.Fatal(err)
	}
	got := waitForJob(t, ns, "mn", "TemplateDrift", func(j *troupev1.ChainerJob) bool {
		return meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionTemplateDrift)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionTemplateDrift); c.Reason != troupev1.ReasonTemplateChangeHeld {
		t.Errorf("TemplateDrift reason = %q, want %q", c.Reason, troupev1.ReasonTemplateChangeHeld)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil {
		t.Fatal(err)
	}
	if !hasEnv(sts.Spec.Template.Spec.Containers[0], "INJECTED_BY") {
		t.Errorf("the worker template was rewritten while a worker ran")
	}
	if sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("updateStrategy = %q after the drift, want OnDelete", sts.Spec.UpdateStrategy.Type)
	}

	// Once no pod of the job runs, the template is written and the drift is over.
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	// Written whole: what the older template had and the new one lacks is gone (the operator's
	// cache holds no template to patch from).
	waitUntil(t, &appsv1.StatefulSet{}, ns, "mn-workerset-ws0", "the new template written", func(s *appsv1.StatefulSet) bool {
		_, injected := s.Spec.Template.Annotations["injected-by"]
		return !hasEnv(s.Spec.Template.Spec.Containers[0], "INJECTED_BY") && !injected
	})
	waitForJob(t, ns, "mn", "TemplateDrift False", func(j *troupev1.ChainerJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionTemplateDrift)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == troupev1.ReasonTemplatesCurrent
	})
}

func hasEnv(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// The master Job replaces a failed master pod only once it has terminated, so that two
// masters of one job never run at once. (The API server defaults the policy to Failed only for
// a Job with a podFailurePolicy, which an MPI launcher has and a master of its own does not.)
func TestMasterJobReplacesOnlyTerminatedPods(t *testing.T) {
	ns := newNamespace(t)
	for name, job := range map[string]*troupev1.ChainerJob{
		"mpi":  testutil.MakeChainerJob("mpi", ns).WorkerSet("ws0", 1).Obj(),
		"none": testutil.MakeChainerJob("none", ns).Obj(),
	} {
		if name == "none" {
			job.Spec.Backend = troupev1.ChainerBackendNone
		}
		create(t, job)
		master := waitFor(t, &batchv1.Job{}, ns, name+"-master")
		if got := ptr.Deref(master.Spec.PodReplacementPolicy, ""); got != batchv1.Failed {
			t.Errorf("backend %s: master Job podReplacementPolicy = %q, want Failed", name, got)
		}
	}
}

// A Kueue-style admission is one update that places a suspended job and resumes it. It is
// admitted, and the placement reaches the master Job (whose template the API server lets
// change while it is suspended and has never started) and the workers.
func TestPlaceAndResumeInOneUpdate(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	create(t, testutil.MakeChainerJob("mn", ns).WorkerSet("ws0", 1).Suspend(true).Obj())
	waitForJob(t, ns, "mn", "Suspended", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSuspended })
	waitFor(t, &batchv1.Job{}, ns, "mn-master")

	placement := map[string]string{"pool": "a"}
	toleration := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job := &troupev1.ChainerJob{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mn"}, job); err != nil {
			return err
		}
		job.Spec.Master.Template.Spec.NodeSelector = placement
		job.Spec.Master.Template.Spec.Tolerations = []corev1.Toleration{toleration}
		testutil.EditWorkerSet(job, "ws0", func(ws *troupev1.ChainerWorkerSet) { ws.Template.Spec.NodeSelector = placement })
		job.Spec.RunPolicy.Suspend = ptr.To(false)
		return k8s.Update(ctx, job)
	}); err != nil {
		t.Fatalf("set the nodeSelector and unsuspend in one update: %v", err)
	}
	checkPlacedAndResumed(t, ns, placement, toleration)
}

// Scheduling fields changed while the job is suspended reach its master Job and workers when
// it resumes, in a later update.
func TestSchedulingFieldsChangedWhileSuspendedApplyOnResume(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	create(t, testutil.MakeChainerJob("mn", ns).WorkerSet("ws0", 1).Suspend(true).Obj())
	waitForJob(t, ns, "mn", "Suspended", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSuspended })
	waitFor(t, &batchv1.Job{}, ns, "mn-master")

	placement := map[string]string{"pool": "b"}
	toleration := corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists}
	update := func(mutate func(*troupev1.ChainerJob)) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			job := &troupev1.ChainerJob{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mn"}, job); err != nil {
				return err
			}
			mutate(job)
			return k8s.Update(ctx, job)
		}); err != nil {
			t.Fatal(err)
		}
	}
	update(func(job *troupev1.ChainerJob) {
		job.Spec.Master.Template.Spec.NodeSelector = placement
		job.Spec.Master.Template.Spec.Tolerations = []corev1.Toleration{toleration}
		testutil.EditWorkerSet(job, "ws0", func(ws *troupev1.ChainerWorkerSet) { ws.Template.Spec.NodeSelector = placement })
	})
	waitForJob(t, ns, "mn", "the placement observed", func(j *troupev1.ChainerJob) bool {
		return j.Status.ObservedGeneration == j.Generation
	})
	update(func(job *troupev1.ChainerJob) { job.Spec.RunPolicy.Suspend = ptr.To(false) })
	checkPlacedAndResumed(t, ns, placement, toleration)
}

func checkPlacedAndResumed(t *testing.T, ns string, placement map[string]string, toleration corev1.Toleration) {
	t.Helper()
	master := waitUntil(t, &batchv1.Job{}, ns, "mn-master", "resumed", func(j *batchv1.Job) bool {
		return !ptr.Deref(j.Spec.Suspend, true)
	})
	if got := master.Spec.Template.Spec.NodeSelector; !equalMaps(got, placement) {
		t.Errorf("master Job nodeSelector = %v after resume, want %v", got, placement)
	}
	if got := master.Spec.Template.Spec.Tolerations; len(got) != 1 || got[0] != toleration {
		t.Errorf("master Job tolerations = %v after resume, want [%v]", got, toleration)
	}
	sts := waitUntil(t, &appsv1.StatefulSet{}, ns, "mn-workerset-ws0", "scaled up", func(s *appsv1.StatefulSet) bool {
		return ptr.Deref(s.Spec.Replicas, 0) == 1
	})
	if got := sts.Spec.Template.Spec.NodeSelector; !equalMaps(got, placement) {
		t.Errorf("workers' nodeSelector = %v after resume, want %v", got, placement)
	}
}
