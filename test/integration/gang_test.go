package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// A Coscheduling job gets its PodGroup (owned, labelled, every pod counted), every pod joins
// it, the minimum follows a scale-up, and the job reports when the gang is placed.
func TestCoschedulingGang(t *testing.T) {
	ns := newNamespace(t)
	job := testutilJob("gang", ns, 2)
	job.Spec.SchedulingPolicy.Gang = ptr.To(troupev1.GangCoscheduling)
	create(t, job)

	pg := waitFor(t, &schedv1alpha1.PodGroup{}, ns, "gang")
	checkOwnedAndLabelled(t, pg, job, map[string]string{controllers.ChainerJobNameLabel: "gang", troupev1.LabelJobUID: string(job.UID)})
	if pg.Spec.MinMember != 3 {
		t.Errorf("minMember = %d, want 3: the master counts with the workers", pg.Spec.MinMember)
	}
	for _, tmpl := range []*corev1.PodTemplateSpec{
		&waitFor(t, &batchv1.Job{}, ns, "gang-master").Spec.Template,
		&waitFor(t, &appsv1.StatefulSet{}, ns, "gang-workerset-ws0").Spec.Template,
	} {
		if tmpl.Spec.SchedulerName != testCoscheduler || tmpl.Labels["scheduling.x-k8s.io/pod-group"] != "gang" {
			t.Errorf("pod template scheduler %q, labels %v; want %s and the pod-group label", tmpl.Spec.SchedulerName, tmpl.Labels, testCoscheduler)
		}
	}
	got := waitForJob(t, ns, "gang", "waiting for its gang", func(j *troupev1.ChainerJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionGangScheduled)
		return c != nil && c.Status == "False" && c.Reason == troupev1.ReasonGangWaiting
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionGangScheduled)
	if !strings.Contains(c.Message, "waiting for 3 pods to fit together") {
		t.Errorf("GangScheduled message = %q", c.Message)
	}

	setStatus(t, pg, func() { pg.Status.Phase = schedv1alpha1.PodGroupRunning })
	waitForJob(t, ns, "gang", "gang scheduled", func(j *troupev1.ChainerJob) bool {
		return meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionGangScheduled)
	})

	scale(t, ns, "gang", 4)
	waitUntil(t, &schedv1alpha1.PodGroup{}, ns, "gang", "minMember 5 after the scale-up", func(p *schedv1alpha1.PodGroup) bool {
		return p.Spec.MinMember == 5
	})
}

// A job asking for a gang provider the cluster does not have (here Volcano: its CRDs are not
// installed) is told so on its status and by an event, and nothing is created.
func TestGangProviderUnavailable(t *testing.T) {
	ns := newNamespace(t)
	job := testutilJob("novolcano", ns, 1)
	job.Spec.SchedulingPolicy.Gang = ptr.To(troupev1.GangVolcano)
	create(t, job)
	got := waitForJob(t, ns, "novolcano", "the unavailable provider reported", func(j *troupev1.ChainerJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason == troupev1.ReasonGangUnavailable
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized)
	if want := "Volcano is not installed in this cluster"; !strings.Contains(c.Message, want) {
		t.Errorf("message %q lacks %q", c.Message, want)
	}
	expectEvent(t, ns, "novolcano", troupev1.ReasonGangUnavailable)
	var jobs batchv1.JobList
	if err := k8s.List(context.Background(), &jobs); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.Namespace == ns {
			t.Errorf("created %s although its gang cannot be scheduled", j.Name)
		}
	}
	if diff := cmp.Diff(troupev1.JobPending, got.Status.Phase); diff != "" {
		t.Errorf("phase (-want +got): %s", diff)
	}
}

// testutilJob is a ChainerJob with one worker set of workers pods.
func testutilJob(name, ns string, workers int32) *troupev1.ChainerJob {
	return testutil.MakeChainerJob(name, ns).WorkerSet("ws0", workers).Obj()
}
