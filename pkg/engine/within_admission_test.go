package engine

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A running job Kueue admitted is held to its admitted pod counts: a worker set scaled past
// them builds no StatefulSet replica (nor worker Job) beyond the count, and WorkersReady says
// why. A suspended job, a job without the record and a set within its count are as asked.
func TestWorkerSetsStayWithinTheirAdmission(t *testing.T) {
	tests := map[string]struct {
		annotation string
		suspended  bool
		wantCPU    int32
		awaiting   bool
	}{
		"scaled past its admission": {annotation: "master=1,cpu=1,gpu=1", wantCPU: 1, awaiting: true},
		"within its admission":      {annotation: "master=1,cpu=2,gpu=1", wantCPU: 2},
		"no admission recorded":     {wantCPU: 2},
		"suspended":                 {annotation: "master=1,cpu=1,gpu=1", suspended: true, wantCPU: 2},
		"a count it cannot read":    {annotation: "cpu=many", wantCPU: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			s.RunPolicy.Suspend = ptr.To(tc.suspended)
			job := &troupev1.ChainerJob{}
			if tc.annotation != "" {
				job.Annotations = map[string]string{troupev1.AnnotationAdmittedPodSets: tc.annotation}
			}
			withinAdmission(s, job)
			if got := s.WorkerSets[0].Replicas; got != tc.wantCPU {
				t.Errorf("worker set cpu runs %d replicas, want %d", got, tc.wantCPU)
			}
			for _, o := range Children(s, false) {
				if sts, ok := o.(*appsv1.StatefulSet); ok && sts.Name == "train-workerset-cpu" && *sts.Spec.Replicas != tc.wantCPU {
					t.Errorf("StatefulSet %s built with %d replicas, want %d", sts.Name, *sts.Spec.Replicas, tc.wantCPU)
				}
			}
			obs := observe().master(func(j *batchv1.Job) { j.Status.Active = 1; j.Status.Ready = ptr.To[int32](1) }).
				workers("cpu", tc.wantCPU).workers("gpu", 1).obj()
			st := computeStatus(s, obs, &troupev1.JobStatus{Phase: troupev1.JobRunning}, 1, metav1.Now())
			c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionWorkersReady)
			if got := c.Reason == troupev1.ReasonAwaitingAdmission; got != tc.awaiting {
				t.Errorf("WorkersReady %s/%s %q; awaiting the admission: %t, want %t", c.Status, c.Reason, c.Message, got, tc.awaiting)
			}
			if tc.awaiting && !strings.Contains(c.Message, "cpu: 2 asked, 1 admitted") {
				t.Errorf("WorkersReady's message %q does not say what was asked and admitted", c.Message)
			}
		})
	}
}
