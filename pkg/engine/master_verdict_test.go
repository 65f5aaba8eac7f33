package engine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

var (
	masterUID     = types.UID("master-job-uid")
	podFinishedAt = metav1.NewTime(t0.Add(30 * time.Second))
)

// runningMaster is the master Job as the Job controller leaves it while its one pod runs.
func runningMaster(j *batchv1.Job) {
	j.UID = masterUID
	j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](1), ptr.To[int32](1)
	j.Status.Active, j.Status.Ready = 1, ptr.To[int32](1)
}

// masterPod is a pod of the master Job (controlled by it unless owner says otherwise).
func masterPod(owner types.UID, phase corev1.PodPhase) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "train-master-x",
			Labels: map[string]string{troupev1.LabelRole: troupev1.RoleMaster},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: "train-master", UID: owner, Controller: ptr.To(true),
			}},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{StartedAt: t0, FinishedAt: podFinishedAt},
		}}}
	}
	return p
}

func TestMasterVerdict(t *testing.T) {
	tests := map[string]struct {
		job  func(*batchv1.Job)
		pods []corev1.Pod
		want troupev1.JobPhase
	}{
		"the pod runs": {
			job: runningMaster, pods: []corev1.Pod{masterPod(masterUID, corev1.PodRunning)},
		},
		"the pod succeeded, the Job not yet Complete: success is certain": {
			job: runningMaster, pods: []corev1.Pod{masterPod(masterUID, corev1.PodSucceeded)},
			want: troupev1.JobSucceeded,
		},
		"an earlier pod failed, its replacement succeeded": {
			job:  runningMaster,
			pods: []corev1.Pod{masterPod(masterUID, corev1.PodFailed), masterPod(masterUID, corev1.PodSucceeded)},
			want: troupev1.JobSucceeded,
		},
		"a pod succeeded while another is active: the Job is not done with its pods": {
			job:  runningMaster,
			pods: []corev1.Pod{masterPod(masterUID, corev1.PodSucceeded), masterPod(masterUID, corev1.PodPending)},
		},
		"the succeeded pod is another Job's (a master Job created again)": {
			job: runningMaster, pods: []corev1.Pod{masterPod("earlier-master", corev1.PodSucceeded)},
		},
		"a deadline: the Job controller may still fail the Job for it": {
			job: func(j *batchv1.Job) {
				runningMaster(j)
				j.Spec.ActiveDeadlineSeconds = ptr.To[int64](600)
			},
			pods: []corev1.Pod{masterPod(masterUID, corev1.PodSucceeded)},
		},
		"the Job is being deleted": {
			job: func(j *batchv1.Job) {
				runningMaster(j)
				j.DeletionTimestamp = &t1
			},
			pods: []corev1.Pod{masterPod(masterUID, corev1.PodSucceeded)},
		},
		"the Job is managed by another controller": {
			job: func(j *batchv1.Job) {
				runningMaster(j)
				j.Spec.ManagedBy = ptr.To("example.com/other")
			},
			pods: []corev1.Pod{masterPod(masterUID, corev1.PodSucceeded)},
		},
		"the Job says FailureTarget: a failure is never anticipated": {
			job: func(j *batchv1.Job) {
				runningMaster(j)
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue}}
			},
			pods: []corev1.Pod{masterPod(masterUID, corev1.PodFailed)},
		},
		"the Job says SuccessCriteriaMet": {
			job: func(j *batchv1.Job) {
				runningMaster(j)
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}}
			},
			want: troupev1.JobSucceeded,
		},
		"the Job is Complete": {
			job: finishedJob(batchv1.JobComplete, "CompletionsReached", ""), want: troupev1.JobSucceeded,
		},
		"the Job failed": {
			job: finishedJob(batchv1.JobFailed, "BackoffLimitExceeded", ""), want: troupev1.JobFailed,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obs := observe().master(tc.job).obj()
			if got := masterVerdict(obs.MasterJob, masterPods(tc.pods...)); got != tc.want {
				t.Errorf("masterVerdict = %q, want %q", got, tc.want)
			}
		})
	}
}

// The job is Succeeded once its launcher pod succeeded, with the pod's end as completion time and
// the workers released; the Job's Complete, coming later, changes nothing in the status, so it
// costs no second status write.
func TestSucceededBeforeTheJobSaysComplete(t *testing.T) {
	s := testSpec()
	early := observe().master(runningMaster).workers("cpu", 2).workers("gpu", 1).
		withPods(masterPod(masterUID, corev1.PodSucceeded)).obj()
	got := computeStatus(s, early, &troupev1.JobStatus{}, genOfJob, now)

	if got.Phase != troupev1.JobSucceeded {
		t.Fatalf("phase = %q, want Succeeded", got.Phase)
	}
	if diff := cmp.Diff(&podFinishedAt, got.CompletionTime); diff != "" {
		t.Errorf("completionTime (-want +got):\n%s", diff)
	}
	wantReplicas := []troupev1.ReplicaStatus{{Name: "master", Succeeded: 1}, {Name: "cpu", Ready: 2}, {Name: "gpu", Ready: 1}}
	if diff := cmp.Diff(wantReplicas, got.ReplicaStatuses); diff != "" {
		t.Errorf("replica statuses (-want +got):\n%s", diff)
	}
	if c := conditionSummary(got.Conditions)[troupev1.ConditionSucceeded]; c != "True/MasterSucceeded" {
		t.Errorf("Succeeded condition = %q, want True/MasterSucceeded", c)
	}

	// The Job controller's verdict, later: Complete, its pod counted.
	complete := observe().master(func(j *batchv1.Job) {
		runningMaster(j)
		finishedJob(batchv1.JobComplete, "CompletionsReached", "")(j)
		j.Status.Active, j.Status.Ready = 0, ptr.To[int32](0)
	}).workers("cpu", 2).workers("gpu", 1).withPods(early.Pods...).obj()
	later := computeStatus(s, complete, &got, genOfJob, metav1.NewTime(now.Add(time.Minute)))
	if diff := cmp.Diff(got, later); diff != "" {
		t.Errorf("the Job's Complete changed the status (-early +later):\n%s", diff)
	}
}

// The operator's cache trims pods (trimPod): the master's end, the completion time of a success
// seen before the Job's, must survive the trim.
func TestMasterFinishedAtSurvivesTheCache(t *testing.T) {
	pod := masterPod(masterUID, corev1.PodSucceeded)
	trimmed, err := trimPod(&pod)
	if err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train-master", UID: masterUID}}
	got := masterFinishedAt(job, masterPods(*readBack(trimmed)))
	if diff := cmp.Diff(&podFinishedAt, got); diff != "" {
		t.Errorf("masterFinishedAt after trimPod (-want +got):\n%s", diff)
	}
}
