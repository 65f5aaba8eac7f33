package engine

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// planRestart as a table: no client, only the spec, the previous status and an observation.
func TestPlanRestart(t *testing.T) {
	attemptLabel := func(n string) func(*batchv1.Job) {
		return func(j *batchv1.Job) { j.Spec.Template.Labels = map[string]string{troupev1.LabelRestartAttempt: n} }
	}
	failedMaster := func(n string) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			attemptLabel(n)(j)
			finishedJob(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "")(j)
		}
	}
	masterPod := func(attempt string, deleting bool) corev1.Pod {
		p := workerPod("train-master-x", "m", attempt, func(p *corev1.Pod) { p.Labels[troupev1.LabelRole] = troupev1.RoleMaster })
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	withPolicy := func(max int32) func(*Spec) {
		return func(s *Spec) { s.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: max} }
	}
	stopping := []metav1.Condition{{Type: troupev1.ConditionRestarting, Status: metav1.ConditionTrue, Reason: troupev1.ReasonStoppingAttempt}}
	workerFailed := []metav1.Condition{{Type: troupev1.ConditionFailed, Status: metav1.ConditionTrue, Reason: troupev1.ReasonWorkerFailed}}

	tests := map[string]struct {
		spec func(*Spec)
		prev troupev1.JobStatus
		obs  *Observed
		// want
		stopping, deciding, clean, forgets bool
		cause                              bool
		staleMasterPods                    int
		stopLauncher                       bool
	}{
		"no failure policy: nothing": {prev: troupev1.JobStatus{Phase: troupev1.JobRunning},
			obs: observe().master(failedMaster("0")).obj()},
		"the current attempt's master failed, a restart left: decided, master forgotten": {spec: withPolicy(1),
			prev: troupev1.JobStatus{Phase: troupev1.JobRunning}, obs: observe().master(failedMaster("0")).obj(),
			deciding: true, cause: true, forgets: true, clean: true},
		"no restart left: the failure is the job's": {spec: withPolicy(1),
			prev: troupev1.JobStatus{Phase: troupev1.JobRunning, Restarts: 1}, obs: observe().master(failedMaster("1")).obj(),
			cause: true, clean: true},
		"debug mode never restarts": {spec: func(s *Spec) { withPolicy(1)(s); s.RunMode.Debug = &ReplicaOverrides{} },
			prev: troupev1.JobStatus{Phase: troupev1.JobRunning}, obs: observe().master(failedMaster("0")).obj(), clean: true},
		"an earlier attempt's master Job: stopping, deleted and forgotten": {spec: withPolicy(2),
			prev: troupev1.JobStatus{Phase: troupev1.JobRestarting, Restarts: 1, Conditions: stopping},
			obs:  observe().master(attemptLabel("0")).obj(), stopping: true, forgets: true},
		"an earlier attempt's pods: stopping; its master pod deleted, not one being deleted": {spec: withPolicy(2),
			prev:     troupev1.JobStatus{Phase: troupev1.JobRestarting, Restarts: 1, Conditions: stopping},
			obs:      observe().withPods(masterPod("0", false), masterPod("0", true), workerPod("train-workerset-cpu-0", "w", "0", nil)).obj(),
			stopping: true, staleMasterPods: 1},
		"nothing left of the earlier attempt: still stopping until recorded, and clean": {spec: withPolicy(2),
			prev: troupev1.JobStatus{Phase: troupev1.JobRestarting, Restarts: 1, Conditions: stopping},
			obs:  observe().obj(), stopping: true, clean: true},
		"failed for good by a lost worker: its launcher is stopped": {spec: withPolicy(1),
			prev: troupev1.JobStatus{Phase: troupev1.JobFailed, Restarts: 1, Conditions: workerFailed},
			obs:  observe().master(attemptLabel("1")).obj(), stopLauncher: true},
		"failed for good, launcher already suspended": {spec: withPolicy(1),
			prev: troupev1.JobStatus{Phase: troupev1.JobFailed, Restarts: 1, Conditions: workerFailed},
			obs:  observe().master(func(j *batchv1.Job) { attemptLabel("1")(j); j.Spec.Suspend = ptr.To(true) }).obj()},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			s.WorkerSets = nil
			if tt.spec != nil {
				tt.spec(s)
			}
			tt.obs.Attempt = currentAttempt(s, &tt.prev) // as observe splits the pods
			tt.obs.setPods(tt.obs.Pods)
			p := planRestart(s, tt.obs, &tt.prev)
			if p.state.Stopping != tt.stopping || p.state.Deciding != tt.deciding || p.seen.Clean != tt.clean ||
				p.forgetsMaster() != tt.forgets || (p.seen.Cause != "") != tt.cause ||
				len(p.staleMasterPods) != tt.staleMasterPods || (p.launcherToStop != nil) != tt.stopLauncher {
				t.Errorf("plan: stopping %t, deciding %t, clean %t, forgets master %t, cause %q, stale master pods %d, stop launcher %t",
					p.state.Stopping, p.state.Deciding, p.seen.Clean, p.forgetsMaster(), p.seen.Cause, len(p.staleMasterPods), p.launcherToStop != nil)
			}
			if tt.spec != nil && p.state.Attempt != tt.prev.Restarts {
				t.Errorf("attempt %d, want status.restarts %d", p.state.Attempt, tt.prev.Restarts)
			}
		})
	}
}
