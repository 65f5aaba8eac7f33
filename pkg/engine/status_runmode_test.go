package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// withoutSeedConditions drops the conditions this file tests (and LauncherWaiting,
// status_launcher_test.go's), for tests about the others.
func withoutSeedConditions(cs []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range cs {
		switch c.Type {
		case troupev1.ConditionPaused, troupev1.ConditionCompleted, troupev1.ConditionComplete,
			troupev1.ConditionLauncherWaiting: // status_launcher_test.go's
		default:
			out = append(out, c)
		}
	}
	return out
}

// seedConditions reduces the Paused, Completed and Complete conditions to "Status/Reason".
func seedConditions(cs []metav1.Condition) map[string]string {
	out := map[string]string{}
	for _, c := range cs {
		switch c.Type {
		case troupev1.ConditionPaused, troupev1.ConditionCompleted, troupev1.ConditionComplete:
			out[c.Type] = string(c.Status) + "/" + c.Reason
		}
	}
	return out
}

func pausedStatus(phase troupev1.JobPhase) troupev1.JobStatus {
	return troupev1.JobStatus{Phase: phase, Conditions: []metav1.Condition{
		{Type: troupev1.ConditionPaused, Status: metav1.ConditionTrue, Reason: troupev1.ReasonPaused, LastTransitionTime: t0},
	}}
}

func TestRunModeStatus(t *testing.T) {
	running := func(j *batchv1.Job) { j.Status.Active = 1; j.Status.Ready = ptr.To[int32](1) }
	tests := map[string]struct {
		pause          bool
		prev           troupev1.JobStatus
		obs            *Observed
		wantPhase      troupev1.JobPhase
		wantConditions map[string]string
		wantSucceeded  int32
		wantRunning    string
		wantWorkers    string
	}{
		"running, never paused": {
			obs:       observe().master(running).workers("cpu", 2).workers("gpu", 1).pod("master", "", corev1.PodRunning, 0).obj(),
			wantPhase: troupev1.JobRunning,
			wantConditions: map[string]string{
				"Paused": "False/NotPaused", "Completed": "False/NotCompleted",
			},
			wantRunning: "True/MasterRunning", wantWorkers: "True/AllWorkersReady",
		},
		"paused while its pods go": {
			pause: true,
			prev:  troupev1.JobStatus{Phase: troupev1.JobRunning},
			obs: observe().workers("cpu", 2).workers("gpu", 1).
				pod("master", "", corev1.PodRunning, 0).pod("worker", "cpu", corev1.PodRunning, 0).obj(),
			wantPhase:      troupev1.JobPaused,
			wantConditions: map[string]string{"Paused": "True/PauseEnabled", "Completed": "False/NotCompleted"},
			wantRunning:    "False/PauseEnabled", wantWorkers: "False/PauseEnabled",
		},
		"unpaused: Resuming until the master runs": {
			prev:           pausedStatus(troupev1.JobPaused),
			obs:            observe().master(nil).workers("cpu", 0).workers("gpu", 0).pod("worker", "cpu", corev1.PodPending, 0).obj(),
			wantPhase:      troupev1.JobResuming,
			wantConditions: map[string]string{"Paused": "False/Resumed", "Completed": "False/NotCompleted"},
			wantRunning:    "False/MasterNotRunning", wantWorkers: "False/WorkersNotReady",
		},
		"resumed and running again": {
			prev:           pausedStatus(troupev1.JobResuming),
			obs:            observe().master(running).workers("cpu", 2).workers("gpu", 1).pod("master", "", corev1.PodRunning, 0).obj(),
			wantPhase:      troupev1.JobRunning,
			wantConditions: map[string]string{"Paused": "False/Resumed", "Completed": "False/NotCompleted"},
			wantRunning:    "True/MasterRunning", wantWorkers: "True/AllWorkersReady",
		},
		"succeeded: Completed and Complete, one success": {
			obs:       observe().master(finishedJob(batchv1.JobComplete, "", "")).workers("cpu", 0).workers("gpu", 0).obj(),
			wantPhase: troupev1.JobSucceeded,
			wantConditions: map[string]string{
				"Paused": "False/NotPaused", "Completed": "True/Succeeded", "Complete": "True/MasterSucceeded",
			},
			wantSucceeded: 1, wantRunning: "False/MasterSucceeded", wantWorkers: "False/WorkersReleased",
		},
		"failed: Completed with reason Failed, not Complete": {
			obs:            observe().master(finishedJob(batchv1.JobFailed, "BackoffLimitExceeded", "too many retries")).workers("cpu", 0).workers("gpu", 0).obj(),
			wantPhase:      troupev1.JobFailed,
			wantConditions: map[string]string{"Paused": "False/NotPaused", "Completed": "True/Failed"},
			wantRunning:    "False/MasterFailed", wantWorkers: "False/WorkersReleased",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			s.RunMode.Pause, s.Plan.Pause = tc.pause, tc.pause
			got := computeStatus(s, tc.obs, &tc.prev, genOfJob, now)
			if got.Phase != tc.wantPhase {
				t.Errorf("phase = %q, want %q", got.Phase, tc.wantPhase)
			}
			if diff := cmp.Diff(tc.wantConditions, seedConditions(got.Conditions)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			others := conditionSummary(got.Conditions)
			if others["Running"] != tc.wantRunning || others["WorkersReady"] != tc.wantWorkers {
				t.Errorf("Running = %s, WorkersReady = %s; want %s, %s", others["Running"], others["WorkersReady"], tc.wantRunning, tc.wantWorkers)
			}
			if got.Succeeded != tc.wantSucceeded {
				t.Errorf("succeeded = %d, want %d", got.Succeeded, tc.wantSucceeded)
			}
		})
	}
}

// A failed job's Completed condition carries the Failed condition's message, and the Complete
// condition keeps its transition time once set.
func TestCompletedConditions(t *testing.T) {
	s := testSpec()
	o := observe().master(finishedJob(batchv1.JobFailed, "DeadlineExceeded", "Job was active longer than specified deadline")).obj()
	got := computeStatus(s, o, &troupev1.JobStatus{}, 1, now)
	for _, c := range got.Conditions {
		if c.Type == troupev1.ConditionCompleted && c.Message != "the master failed: Job was active longer than specified deadline" {
			t.Errorf("Completed message = %q, want the failure's", c.Message)
		}
	}

	o = observe().master(finishedJob(batchv1.JobComplete, "", "")).obj()
	first := computeStatus(s, o, &troupev1.JobStatus{}, 1, t1)
	second := computeStatus(s, o, &first, 1, now)
	for _, c := range second.Conditions {
		if c.Type == troupev1.ConditionComplete && !c.LastTransitionTime.Equal(&t1) {
			t.Errorf("Complete moved to %v, want it kept at %v", c.LastTransitionTime, t1)
		}
	}
}

func namedRolePod(name, role string, phase corev1.PodPhase, restarts int32) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{troupev1.LabelRole: role}},
		Status:     corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", RestartCount: restarts}}},
	}
}

func TestTasksAndAggregate(t *testing.T) {
	deleting := namedRolePod("train-workerset-gpu-0", "worker", corev1.PodRunning, 0)
	deleting.DeletionTimestamp = &now
	pods := []corev1.Pod{
		namedRolePod("train-workerset-cpu-1", "worker", corev1.PodPending, 0),
		namedRolePod("train-master-abc", "master", corev1.PodFailed, 0),
		namedRolePod("train-workerset-cpu-0", "worker", corev1.PodRunning, 2),
		deleting,
		namedRolePod("train-master-def", "master", corev1.PodRunning, 1),
	}
	s := testSpec()
	s.RunMode.MasterType = troupev1.ReplicaLauncher
	o := observe().master(nil).workers("cpu", 1).workers("gpu", 0).obj()
	o.setPods(pods)
	got := computeStatus(s, o, &troupev1.JobStatus{}, 1, now)

	ref := func(name string, phase corev1.PodPhase) troupev1.PodReference {
		return troupev1.PodReference{Name: name, UID: types.UID("uid-" + name), Phase: phase}
	}
	wantTasks := []troupev1.TaskStatus{
		{Type: "launcher", RestartCount: 1, Status: []troupev1.PodReference{
			ref("train-master-abc", corev1.PodFailed), ref("train-master-def", corev1.PodRunning),
		}},
		{Type: "worker", RestartCount: 2, Status: []troupev1.PodReference{
			ref("train-workerset-cpu-0", corev1.PodRunning), ref("train-workerset-cpu-1", corev1.PodPending),
			ref("train-workerset-gpu-0", corev1.PodRunning),
		}},
	}
	if diff := cmp.Diff(wantTasks, got.Tasks); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	// Three workers wanted, two live (the third is being deleted): one is being created.
	want := &troupev1.Aggregate{Creating: 1, Pending: 1, Running: 2, Failed: 1, Deleted: 1}
	if diff := cmp.Diff(want, got.Aggregate); diff != "" {
		t.Errorf("aggregate (-want +got):\n%s", diff)
	}

	// Paused: nothing is wanted, so nothing is being created.
	s.RunMode.Pause, s.Plan.Pause = true, true
	got = computeStatus(s, o, &troupev1.JobStatus{}, 1, now)
	if got.Aggregate.Creating != 0 {
		t.Errorf("paused job: creating = %d, want 0", got.Aggregate.Creating)
	}
	// A fresh job: the master and every worker are being created.
	got = computeStatus(testSpec(), observe().obj(), &troupev1.JobStatus{}, 1, now)
	if diff := cmp.Diff(&troupev1.Aggregate{Creating: 4}, got.Aggregate); diff != "" {
		t.Errorf("fresh job aggregate (-want +got):\n%s", diff)
	}
	if len(got.Tasks) != 2 || got.Tasks[0].Type != "master" || got.Tasks[0].Status != nil {
		t.Errorf("fresh job tasks = %+v, want an empty master task and an empty worker task", got.Tasks)
	}
}
