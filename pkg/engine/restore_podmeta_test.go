package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// A suspended master Job that never started gets the labels and annotations its template gains
// while the job waits (Kueue's TAS marks, an admission check's annotations) and keeps those the
// API server gave its pods' template; none is removed.
func TestRestoreSchedulingDirectivesAddsPodLabels(t *testing.T) {
	s := testSpec()
	s.RunPolicy.Suspend = ptr.To(true)
	cur := BuildMasterJob(s)
	cur.Spec.Template.Labels["batch.kubernetes.io/controller-uid"] = "c-1"
	s.Master.Template.Labels = map[string]string{"kueue.x-k8s.io/podset": "master"}
	s.Master.Template.Annotations = map[string]string{"kueue.x-k8s.io/workload": "wl"}
	s.RunPolicy.Suspend = ptr.To(false)
	want := BuildMasterJob(s)

	if !restore(cur, want) {
		t.Fatal("nothing restored")
	}
	got := cur.Spec.Template
	if got.Labels["kueue.x-k8s.io/podset"] != "master" || got.Labels["batch.kubernetes.io/controller-uid"] != "c-1" {
		t.Errorf("pod template labels %v: want the podset label added and the controller-uid kept", got.Labels)
	}
	if diff := cmp.Diff(map[string]string{"kueue.x-k8s.io/workload": "wl"}, got.Annotations); diff != "" {
		t.Errorf("pod template annotations (-want +got):\n%s", diff)
	}
	if restoreSchedulingDirectives(cur, want) {
		t.Error("a second pass changed the Job again")
	}
}
