package e2e

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// simOutcomeWaitTimeout makes the simulated launcher's troupe-wait init container exit 3 with
// a message naming a missing host, as troupe-agent wait does at its deadline.
const simOutcomeWaitTimeout = "wait-timeout"

// A launcher whose wait for its workers times out fails the job at once, through the master
// Job's pod failure policy and the real Job controller, without spending the backoffLimit
// retries, and the job's Failed and LauncherWaiting conditions name the missing host.
func TestLauncherWaitTimeoutFailsTheJob(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("late", ns).WorkerSet("ws0", 1).BackoffLimit(4).Obj()
	job.Spec.Master.Template.Labels = map[string]string{simOutcomeLabel: simOutcomeWaitTimeout}
	create(t, job)
	got := waitForJob(t, ns, "late", "Failed", func(j *troupev1.ChainerJob) bool {
		return j.Status.Phase == troupev1.JobFailed
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionFailed)
	if c == nil || c.Reason != string(batchv1.JobReasonPodFailurePolicy) ||
		!strings.Contains(c.Message, "init container troupe-wait: 1 of 2 hosts still unreachable over KubeExec after 1s: simulated-missing-host") {
		t.Errorf("Failed condition = %+v, want reason PodFailurePolicy and the wait's message naming the host", c)
	}
	// The job's LauncherWaiting condition says the wait timed out, quoting the same message.
	w := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionLauncherWaiting)
	if w == nil || w.Status != "False" || w.Reason != troupev1.ReasonWaitTimedOut || !strings.Contains(w.Message, "simulated-missing-host") {
		t.Errorf("LauncherWaiting condition = %+v, want False, reason WaitTimedOut, naming the host", w)
	}
	master := &batchv1.Job{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "late-master"}, master); err != nil {
		t.Fatal(err)
	}
	if master.Status.Failed != 1 {
		t.Errorf("master pods failed = %d, want 1: a wait timeout is not retried", master.Status.Failed)
	}
}
