package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// While the launcher's troupe-wait init container runs, the job says so in a condition of its
// own that names the worker hosts not ready yet, and tells it once as an event; the condition
// goes False when the wait ends and the launcher runs. The pod states are those the kubelet
// writes, one after the other.
func TestLauncherWaitingCondition(t *testing.T) {
	ns := newNamespace(t)
	job := create(t, testutil.MakeChainerJob("waits", ns).WorkerSet("ws0", 2).Obj())
	host := func(i string) string { return "waits-workerset-ws0-" + i + ".waits." + ns + ".svc" }
	waitingCondition(t, ns, "waits", "before the launcher pod", metav1.ConditionFalse, troupev1.ReasonWaitNotStarted)

	// The Job controller creates the launcher pod; the kubelet pulls and starts troupe-wait.
	master := waitFor(t, &batchv1.Job{}, ns, "waits-master") // held while a master pod exists
	pod := launcherPod(t, job, "waits-master-a")
	setStatus(t, pod, func() {
		pod.Status.Phase = corev1.PodPending
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: troupev1.ContainerLauncherWait, Image: testAgentImage,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	})
	started := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	setStatus(t, pod, func() {
		pod.Status.InitContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}
		pod.Status.InitContainerStatuses[0].Started = ptr.To(true)
	})
	j := waitingCondition(t, ns, "waits", "while troupe-wait runs", metav1.ConditionTrue, troupev1.ReasonWaitingForWorkers)
	c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionLauncherWaiting)
	if want := "hosts not ready: " + host("0") + ", " + host("1"); !strings.HasSuffix(c.Message, want) {
		t.Errorf("LauncherWaiting message %q, want it to end %q", c.Message, want)
	}
	if j.Status.Phase != troupev1.JobPending || meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionWorkersReady) {
		t.Errorf("phase %s, WorkersReady %v while the launcher waits; want Pending, False",
			j.Status.Phase, meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionWorkersReady))
	}
	waitForEvent(t, ns, "waits", troupev1.EventWaitingForWorkers, host("0")+", "+host("1"))

	// One worker becomes ready: the condition names the other only.
	workerPod(t, job, "waits-workerset-ws0-0")
	waitForJob(t, ns, "waits", "naming only the host not ready", func(j *troupev1.ChainerJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionLauncherWaiting)
		return c != nil && c.Status == metav1.ConditionTrue && strings.HasSuffix(c.Message, "hosts not ready: "+host("1"))
	})

	// The other too; troupe-wait reaches both and exits 0 after 4 s; the launcher runs.
	workerPod(t, job, "waits-workerset-ws0-1")
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "waits-workerset-ws0")
	setStatus(t, sts, func() { sts.Status.Replicas, sts.Status.ReadyReplicas = 2, 2 })
	setStatus(t, pod, func() {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: metav1.NewTime(started.Add(4 * time.Second)),
		}}
		pod.Status.InitContainerStatuses[0].Started = ptr.To(false)
	})
	setFreshStatus(t, master, func() { master.Status.Active, master.Status.Ready = 1, ptr.To[int32](1) })
	j = waitingCondition(t, ns, "waits", "after the wait", metav1.ConditionFalse, troupev1.ReasonWorkersReached)
	c = meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionLauncherWaiting)
	if want := "the launcher finished waiting for its workers after 4s"; c.Message != want {
		t.Errorf("LauncherWaiting message %q, want %q", c.Message, want)
	}
	waitForEvent(t, ns, "waits", troupev1.EventRunning, "is running")
	if n := eventCounts(t, ns, "waits")[troupev1.EventWaitingForWorkers]; n != 1 {
		t.Errorf("%d WaitingForWorkers events, want 1", n)
	}
}

// A wait that times out leaves the condition False with the timeout, quoting the hosts
// troupe-agent named, and it stays so once the job has failed.
func TestLauncherWaitTimeoutCondition(t *testing.T) {
	ns := newNamespace(t)
	job := create(t, testutil.MakeChainerJob("gives-up", ns).WorkerSet("ws0", 1).Obj())
	missing := "gives-up-workerset-ws0-0.gives-up." + ns + ".svc"
	waitFor(t, &batchv1.Job{}, ns, "gives-up-master") // the operator holds it while a master pod exists
	pod := launcherPod(t, job, "gives-up-master-a")
	started := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	setStatus(t, pod, func() {
		pod.Status.Phase = corev1.PodPending
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: troupev1.ContainerLauncherWait, Image: testAgentImage,
			Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}
	})
	waitingCondition(t, ns, "gives-up", "while troupe-wait runs", metav1.ConditionTrue, troupev1.ReasonWaitingForWorkers)

	msg := "1 of 1 hosts still unreachable over SSH after 30s: " + missing + " (last error: dial tcp: lookup " + missing + ": no such host)"
	setStatus(t, pod, func() {
		pod.Status.Phase = corev1.PodFailed
		pod.Status.InitContainerStatuses[0].Started = ptr.To(false)
		pod.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: troupev1.ExitCodeLauncherWaitTimeout, Reason: "Error", Message: msg,
			StartedAt: started, FinishedAt: metav1.NewTime(started.Add(30 * time.Second)),
		}}
	})
	j := waitingCondition(t, ns, "gives-up", "after the timeout", metav1.ConditionFalse, troupev1.ReasonWaitTimedOut)
	want := "the launcher's wait for its workers timed out (troupe-wait exited with code 3): " + msg
	if c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionLauncherWaiting); c.Message != want {
		t.Errorf("LauncherWaiting message\n%q, want\n%q", c.Message, want)
	}

	finishMaster(t, ns, "gives-up", batchv1.JobFailed, "PodFailurePolicy", "Container troupe-wait for pod gives-up-master-a failed with exit code 3")
	waitForJob(t, ns, "gives-up", "Failed", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobFailed })
	deletePods(t, ns)
	// The job is looked at again after its pods went: the condition keeps how the wait ended.
	updateJob(t, ns, "gives-up", func(j *troupev1.ChainerJob) { j.Annotations = map[string]string{"touched": "1"} })
	j = waitForJob(t, ns, "gives-up", "the change seen", func(j *troupev1.ChainerJob) bool { return j.Status.ObservedGeneration == j.Generation })
	if c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionLauncherWaiting); c.Reason != troupev1.ReasonWaitTimedOut {
		t.Errorf("LauncherWaiting of the failed job: %s, want %s", c.Reason, troupev1.ReasonWaitTimedOut)
	}
}

// A launcher that does not wait (backend none) says so.
func TestNoLauncherWaitCondition(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("alone", ns).Obj()
	job.Spec.Backend = troupev1.ChainerBackendNone
	create(t, job)
	waitingCondition(t, ns, "alone", "without a wait", metav1.ConditionFalse, troupev1.ReasonNoLauncherWait)
}

// waitingCondition waits until the job's LauncherWaiting condition has the status and reason.
func waitingCondition(t *testing.T, ns, name, what string, status metav1.ConditionStatus, reason string) *troupev1.ChainerJob {
	t.Helper()
	return waitForJob(t, ns, name, "LauncherWaiting "+string(status)+"/"+reason+" "+what, func(j *troupev1.ChainerJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionLauncherWaiting)
		return c != nil && c.Status == status && c.Reason == reason
	})
}

// launcherPod creates the pod the Job controller creates for the job's master, with the
// troupe-wait init container the operator put in its template, and no status yet.
func launcherPod(t *testing.T, job *troupev1.ChainerJob, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: map[string]string{
			controllers.ChainerJobNameLabel: job.Name, troupev1.LabelJobUID: string(job.UID), troupev1.LabelRole: troupev1.RoleMaster,
		}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: troupev1.ContainerLauncherWait, Image: testAgentImage}},
			Containers:     []corev1.Container{{Name: "chainer", Image: "chainer:test"}},
		},
	}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// workerPod creates a worker pod of set ws0 as its StatefulSet would, running and Ready.
func workerPod(t *testing.T, job *troupev1.ChainerJob, name string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: map[string]string{
			controllers.ChainerJobNameLabel: job.Name, troupev1.LabelJobUID: string(job.UID),
			troupev1.LabelRole: troupev1.RoleWorker, troupev1.LabelWorkerSet: "ws0",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "chainer", Image: "chainer:test"}}},
	}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	setStatus(t, pod, func() {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	})
}
