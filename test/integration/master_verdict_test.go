package integration

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// A job is Succeeded as soon as its launcher pod has succeeded, before the Job controller marks
// the master Job Complete (which, under load, comes many seconds later): completionTime is the
// pod's end and the clean-pod policy releases the workers then.
func TestSucceededWhenTheLauncherSucceeds(t *testing.T) {
	ns := newNamespace(t)
	job := create(t, testutil.MakeChainerJob("quick", ns).WorkerSet("ws0", 1).Obj())
	master := waitFor(t, &batchv1.Job{}, ns, "quick-master")
	ended := metav1.NewTime(time.Now().Add(-10 * time.Second).Truncate(time.Second))
	succeededPodOf(t, job, master, "quick-master-a", ended)

	j := waitForJob(t, ns, "quick", "Succeeded", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSucceeded })
	if j.Status.CompletionTime == nil || !j.Status.CompletionTime.Equal(&ended) {
		t.Errorf("completionTime %v, want the launcher's end %v", j.Status.CompletionTime, ended)
	}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(master), master); err != nil {
		t.Fatal(err)
	}
	if len(master.Status.Conditions) != 0 {
		t.Errorf("the master Job has conditions %+v; the test means the job to succeed before the Job's verdict", master.Status.Conditions)
	}
	waitUntil(t, &appsv1.StatefulSet{}, ns, "quick-workerset-ws0", "scaled to zero (cleanPodPolicy Running)",
		func(s *appsv1.StatefulSet) bool { return ptr.Deref(s.Spec.Replicas, 1) == 0 })
}

// A master Job with a deadline could still be failed by the Job controller for it after its pod
// succeeded: the job waits for the Job's own verdict.
func TestDeadlineWaitsForTheJobsVerdict(t *testing.T) {
	ns := newNamespace(t)
	obj := testutil.MakeChainerJob("bounded", ns).WorkerSet("ws0", 1).Obj()
	obj.Spec.Master.ActiveDeadlineSeconds = ptr.To[int64](3600)
	job := create(t, obj)
	master := waitFor(t, &batchv1.Job{}, ns, "bounded-master")
	succeededPodOf(t, job, master, "bounded-master-a", metav1.NewTime(time.Now().Truncate(time.Second)))

	j := waitForJob(t, ns, "bounded", "counting the launcher's success", func(j *troupev1.ChainerJob) bool { return j.Status.Pods.Succeeded == 1 })
	if j.Status.Phase != troupev1.JobRunning {
		t.Errorf("phase %s before the Job's verdict, want Running", j.Status.Phase)
	}
	finishMaster(t, ns, "bounded", batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods")
	waitForJob(t, ns, "bounded", "Succeeded", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSucceeded })
}

// succeededPodOf creates a launcher pod of the master Job, as the Job controller would, that
// ran and succeeded, its container ending at ended.
func succeededPodOf(t *testing.T, job *troupev1.ChainerJob, master *batchv1.Job, name string, ended metav1.Time) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: map[string]string{
			controllers.ChainerJobNameLabel: job.Name, troupev1.LabelJobUID: string(job.UID), troupev1.LabelRole: troupev1.RoleMaster,
		}, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(master, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "chainer", Image: "chainer:test"}}},
	}
	if err := k8s.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	setStatus(t, pod, func() {
		pod.Status.Phase = corev1.PodSucceeded
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "chainer", Image: "chainer:test", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: ended, FinishedAt: ended},
		}}}
	})
}
