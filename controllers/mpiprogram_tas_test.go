package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// A launcher generated from the workers' template keeps their own labels, annotations and
// placement but not what asks Kueue's TAS to place them: its pod would be taken by the
// topology ungater for one more worker.
func TestGeneratedLauncherIsNoWorkerToTAS(t *testing.T) {
	job := t9kExample(t)
	w := &job.Spec.Worker.Template
	w.Labels = map[string]string{"team": "a", "kueue.x-k8s.io/podset": "worker"}
	w.Annotations = map[string]string{"note": "x", "kueue.x-k8s.io/workload": "wl", "kueue.x-k8s.io/podset-required-topology": "example.com/rack"}
	w.Spec.NodeSelector = map[string]string{"pool": "tas"}
	w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}, {Name: "mine"}}
	s, err := describeMPIJob(t, job)
	if err != nil {
		t.Fatal(err)
	}
	l := s.Master.Template
	got := []any{l.Labels["team"], l.Labels["kueue.x-k8s.io/podset"], l.Annotations, l.Spec.NodeSelector, l.Spec.SchedulingGates}
	want := []any{"a", "", map[string]string{"note": "x"}, map[string]string{"pool": "tas"}, []corev1.PodSchedulingGate{{Name: "mine"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("generated launcher's labels, annotations, nodeSelector, gates (-want +got):\n%s", diff)
	}
	if s.WorkerSets[0].Template.Spec.SchedulingGates[0].Name != "kueue.x-k8s.io/topology" {
		t.Error("the workers lost their TAS gate")
	}
}
