package engine

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// decide as a table, over what the restart, the pause and the master's pods decide together:
// which master Job the rest of the pass sees, what is deleted before anything is created, and
// whether a new master waits for old master pods.
func TestDecide(t *testing.T) {
	ofAttempt := func(n string, mutate func(*batchv1.Job)) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			j.Spec.Template.Labels = map[string]string{troupev1.LabelRestartAttempt: n}
			if mutate != nil {
				mutate(j)
			}
		}
	}
	failed := finishedJob(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "")
	deleting := func(j *batchv1.Job) { j.DeletionTimestamp = &now }
	masterPod := func(attempt string, phase corev1.PodPhase) corev1.Pod {
		return workerPod("train-master-"+attempt, types.UID("m"+attempt), attempt, func(p *corev1.Pod) {
			p.Labels[troupev1.LabelRole], p.Status.Phase = troupev1.RoleMaster, phase
		})
	}
	worker := func(attempt string) corev1.Pod {
		return workerPod("train-workerset-cpu-0", types.UID("w"+attempt), attempt, nil)
	}
	stopping := []metav1.Condition{{Type: troupev1.ConditionRestarting, Status: metav1.ConditionTrue, Reason: troupev1.ReasonStoppingAttempt}}
	workerFailed := []metav1.Condition{{Type: troupev1.ConditionFailed, Status: metav1.ConditionTrue, Reason: troupev1.ReasonWorkerFailed}}

	type want struct {
		masterSeen, holdMaster, stopping, deciding, holdCreates bool
		verdict                                                 troupev1.JobPhase
		deleteMasterJob, suspendLauncher                        bool
		deletePods                                              []string
	}
	tests := map[string]struct {
		maxRestarts *int32 // nil: no failure policy
		pause       bool
		prev        troupev1.JobStatus
		obs         *observed
		want        want
	}{
		"running: the master Job is the job's, nothing deleted": {maxRestarts: ptr.To(int32(1)),
			prev: troupev1.JobStatus{Phase: troupev1.JobRunning},
			obs:  observe().master(ofAttempt("0", nil)).withPods(masterPod("0", corev1.PodRunning), worker("0")),
			want: want{masterSeen: true}},
		"a restart sets the earlier attempt's master aside: its Job and live pod deleted, the new master held": {maxRestarts: ptr.To(int32(2)),
			prev: troupev1.JobStatus{Phase: troupev1.JobRestarting, Restarts: 1, Conditions: stopping},
			obs:  observe().master(ofAttempt("0", nil)).withPods(masterPod("0", corev1.PodRunning), worker("0")),
			want: want{holdMaster: true, stopping: true, deleteMasterJob: true, deletePods: []string{"train-master-0"}}},
		"the earlier attempt's master Job is being deleted: not deleted again, still set aside": {maxRestarts: ptr.To(int32(2)),
			prev: troupev1.JobStatus{Phase: troupev1.JobRestarting, Restarts: 1, Conditions: stopping},
			obs:  observe().master(ofAttempt("0", deleting)),
			want: want{stopping: true}},
		"the current attempt failed with a restart left: no verdict, the master set aside and held while its pod remains": {maxRestarts: ptr.To(int32(1)),
			prev: troupev1.JobStatus{Phase: troupev1.JobRunning},
			obs:  observe().master(ofAttempt("0", failed)).withPods(masterPod("0", corev1.PodFailed)),
			want: want{deciding: true, holdMaster: true}},
		"no restart left: the master's failure is the job's verdict": {maxRestarts: ptr.To(int32(1)),
			prev: troupev1.JobStatus{Phase: troupev1.JobRunning, Restarts: 1},
			obs:  observe().master(ofAttempt("1", failed)).withPods(masterPod("1", corev1.PodFailed)),
			want: want{masterSeen: true, verdict: troupev1.JobFailed, holdCreates: true}},
		"paused while an earlier attempt's master pod lives: deleted once": {maxRestarts: ptr.To(int32(2)), pause: true,
			prev: troupev1.JobStatus{Phase: troupev1.JobRestarting, Restarts: 1, Conditions: stopping},
			obs:  observe().withPods(masterPod("0", corev1.PodRunning), masterPod("1", corev1.PodRunning)),
			want: want{stopping: true, deletePods: []string{"train-master-0", "train-master-1"}}},
		"failed for good by a lost worker: the launcher is suspended, the verdict kept": {maxRestarts: ptr.To(int32(1)),
			prev: troupev1.JobStatus{Phase: troupev1.JobFailed, Restarts: 1, Conditions: workerFailed},
			obs:  observe().master(ofAttempt("1", nil)).withPods(masterPod("1", corev1.PodRunning)),
			want: want{masterSeen: true, verdict: troupev1.JobFailed, holdCreates: true, suspendLauncher: true}},
		"no failure policy, the master Job succeeded: the verdict, nothing deleted": {
			prev: troupev1.JobStatus{Phase: troupev1.JobRunning},
			obs:  observe().master(finishedJob(batchv1.JobComplete, "CompletionsReached", "")),
			want: want{masterSeen: true, verdict: troupev1.JobSucceeded, holdCreates: true}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			s.WorkerSets = s.WorkerSets[:1]
			if tt.maxRestarts != nil {
				s.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: *tt.maxRestarts}
			}
			s.RunMode.Pause, s.Plan.Pause = tt.pause, tt.pause
			tt.obs.Attempt = currentAttempt(s, &tt.prev)
			obs := tt.obs.obj()
			observedMaster := obs.MasterJob

			d := decide(s, obs, &tt.prev)

			var deleted []string
			for _, p := range d.deletePods {
				deleted = append(deleted, p.Name)
			}
			got := want{masterSeen: d.obs.MasterJob != nil, holdMaster: d.plan.HoldMaster, stopping: d.plan.Restart.Stopping,
				deciding: d.plan.Restart.Deciding, holdCreates: d.plan.HoldCreates, verdict: d.plan.Verdict,
				deleteMasterJob: d.deleteMasterJob != nil, suspendLauncher: d.suspendLauncher != nil, deletePods: deleted}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decision\n got %+v\nwant %+v", got, tt.want)
			}
			if obs.MasterJob != observedMaster {
				t.Error("decide changed the observation it was given")
			}
			if d.obs.MasterJob == nil && d.obs.Verdict != "" {
				t.Errorf("the master Job set aside, but its verdict %q stays", d.obs.Verdict)
			}
		})
	}
}
