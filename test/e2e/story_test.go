package e2e

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// `kubectl describe` tells a job's story in its events, one per transition: created, admitted
// by the gang scheduler, workers ready, running, scaled, suspended, resumed, succeeded (the
// README shows this test's output).
func TestDescribeTellsTheStory(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("story", ns).WorkerSet("ws0", 2).Obj()
	job.Spec.SchedulingPolicy.Gang = ptr.To(troupev1.GangVolcano)
	job.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: "20s"}
	create(t, job)
	running := func(j *troupev1.ChainerJob) bool {
		return j.Status.Phase == troupev1.JobRunning && meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionWorkersReady)
	}
	waitForJob(t, ns, "story", "Running with its workers ready", running)

	updateChainerJob(t, ns, "story", func(j *troupev1.ChainerJob) {
		testutil.EditWorkerSet(j, "ws0", func(ws *troupev1.ChainerWorkerSet) { ws.Replicas = ptr.To[int32](3) })
	})
	waitForJob(t, ns, "story", "with 3 workers ready", func(j *troupev1.ChainerJob) bool { return running(j) && j.Status.Workers == "3/3" })
	updateChainerJob(t, ns, "story", func(j *troupev1.ChainerJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) })
	waitForJob(t, ns, "story", "Suspended", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSuspended })
	updateChainerJob(t, ns, "story", func(j *troupev1.ChainerJob) { j.Spec.RunPolicy.Suspend = ptr.To(false) })
	waitForJob(t, ns, "story", "Succeeded", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobSucceeded })

	var out string
	eventually(t, "kubectl describe shows the story", func(context.Context) (bool, error) {
		var err error
		out, err = kubectl("describe", "-n", ns, "chainerjob", "story")
		if err != nil {
			return false, err
		}
		_, events, _ := strings.Cut(out, "\nEvents:")
		for _, reason := range []string{troupev1.EventCreated, troupev1.EventGangScheduled, troupev1.EventWorkersReady,
			troupev1.EventRunning, troupev1.EventScaled, troupev1.EventSuspended, troupev1.EventResumed, troupev1.EventSucceeded} {
			if !strings.Contains(events, "  "+reason+" ") {
				return false, nil
			}
		}
		return true, nil
	})
	_, events, _ := strings.Cut(out, "\nEvents:")
	t.Logf("kubectl describe chainerjob story, its events:\nEvents:%s", events)
	if !strings.Contains(events, "worker set ws0 scaled from 2 to 3 replicas") {
		t.Errorf("the Scaled event does not give the counts:%s", events)
	}
}

func updateChainerJob(t *testing.T, ns, name string, mutate func(*troupev1.ChainerJob)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var j troupev1.ChainerJob
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &j); err != nil {
			return err
		}
		mutate(&j)
		return k8s.Update(context.Background(), &j)
	})
	if err != nil {
		t.Fatalf("update ChainerJob %s: %v", name, err)
	}
}
