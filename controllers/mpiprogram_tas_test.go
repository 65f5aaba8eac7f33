package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// A launcher generated from the workers' template is marked for Kueue's TAS as its own pod
// set, not as one more worker (the topology ungater would take it for one and leave a worker
// gated): pod set label launcher, no topology level of the workers' (unconstrained instead),
// the Workload annotation and the gate kept; the rest of the workers' metadata and placement
// as before.
func TestGeneratedLauncherIsItsOwnPodSetToTAS(t *testing.T) {
	job := t9kExample(t)
	w := &job.Spec.Worker.Template
	w.Labels = map[string]string{"team": "a", "kueue.x-k8s.io/podset": "worker"}
	w.Annotations = map[string]string{"note": "x", "kueue.x-k8s.io/workload": "wl", "kueue.x-k8s.io/podset-required-topology": "example.com/rack"}
	w.Spec.NodeSelector = map[string]string{"pool": "tas"}
	w.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}}
	s, err := describeMPIJob(t, job)
	if err != nil {
		t.Fatal(err)
	}
	l := s.Master.Template
	got := []any{l.Labels, l.Annotations, l.Spec.NodeSelector, l.Spec.SchedulingGates}
	want := []any{
		map[string]string{"team": "a", "kueue.x-k8s.io/podset": "launcher"},
		map[string]string{"note": "x", "kueue.x-k8s.io/workload": "wl", "kueue.x-k8s.io/podset-unconstrained-topology": "true"},
		map[string]string{"pool": "tas"},
		[]corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("generated launcher's labels, annotations, nodeSelector, gates (-want +got):\n%s", diff)
	}
	if s.WorkerSets[0].Template.Labels["kueue.x-k8s.io/podset"] != "worker" {
		t.Error("the workers' template changed")
	}

	// A job that asks nothing of TAS gets no mark on its launcher.
	s, err = describeMPIJob(t, t9kExample(t))
	if err != nil {
		t.Fatal(err)
	}
	if ann := s.Master.Template.Annotations; len(ann) != 0 {
		t.Errorf("launcher annotations %v, want none", ann)
	}
}
