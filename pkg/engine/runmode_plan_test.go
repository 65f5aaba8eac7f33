package engine

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// planPause as a table: pause is in force unless the job has finished, by its status or by its
// master Job's verdict; the master Job found is deleted.
func TestPlanPause(t *testing.T) {
	running := &batchv1.Job{}
	ended := &batchv1.Job{}
	finishedJob(batchv1.JobComplete, "CompletionsReached", "")(ended)
	tests := map[string]struct {
		asked              bool
		prev               troupev1.JobPhase
		master             *batchv1.Job
		pause, deleteFound bool
	}{
		"not asked":                              {master: running},
		"asked, master running: paused, deleted": {asked: true, prev: troupev1.JobRunning, master: running, pause: true, deleteFound: true},
		"asked, no master Job: paused":           {asked: true, prev: troupev1.JobRunning, pause: true},
		"asked, the master Job has ended":        {asked: true, prev: troupev1.JobRunning, master: ended},
		"asked, the job has finished":            {asked: true, prev: troupev1.JobSucceeded, master: running},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			s.RunMode.Pause = tt.asked
			p := planPause(s, &troupev1.JobStatus{Phase: tt.prev}, tt.master)
			if p.pause != tt.pause || (p.deleteMaster != nil) != tt.deleteFound || (p.deleteMaster != nil && p.deleteMaster != tt.master) {
				t.Errorf("pause %t, delete %v; want pause %t, delete the master found %t", p.pause, p.deleteMaster, tt.pause, tt.deleteFound)
			}
		})
	}
}

// planMasterPods as a table: a paused job's master pods are deleted (not those being deleted
// already); a master Job to be created again waits while a master pod is left.
func TestPlanMasterPods(t *testing.T) {
	master := func(deleting bool) corev1.Pod {
		p := workerPod("train-master-x", "m", "0", func(p *corev1.Pod) { p.Labels[troupev1.LabelRole] = troupev1.RoleMaster })
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	worker := workerPod("train-workerset-cpu-0", "w", "0", nil)
	tests := map[string]struct {
		paused     bool
		obs        *Observed
		deletes    int
		holdMaster bool
	}{
		"paused: the live master pod goes":                  {paused: true, obs: observe().withPods(master(false), master(true), worker).obj(), deletes: 1},
		"resumed while the old master pod terminates: held": {obs: observe().withPods(master(true), worker).obj(), holdMaster: true},
		"resumed, no master pod left: not held":             {obs: observe().withPods(worker).obj()},
		"the master Job exists: its pods are its own":       {obs: observe().master(nil).withPods(master(false)).obj()},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			s.RunMode.Pause, s.Plan.Pause = tt.paused, tt.paused
			p := planMasterPods(s, tt.obs)
			if len(p.delete) != tt.deletes || p.holdMaster != tt.holdMaster {
				t.Errorf("deletes %d, hold master %t; want %d, %t", len(p.delete), p.holdMaster, tt.deletes, tt.holdMaster)
			}
		})
	}
}
