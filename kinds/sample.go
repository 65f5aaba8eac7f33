package kinds

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Sample describes a small job of any kind, in the terms every kind shares, for the harnesses
// that run jobs of every registered kind (the chaos run, the tamperings): each kind's Sample
// writes it in its own spec.
type Sample struct {
	Name, Namespace string
	// Master is the master's (launcher's) pod template; the kind adds its container, of Image.
	Master corev1.PodTemplateSpec
	// Image runs in every container.
	Image string
	// WorkerSets are the replicas of each worker set: a kind of one worker set makes the first.
	WorkerSets       []int32
	RunPolicy        troupev1.RunPolicy
	SchedulingPolicy troupev1.SchedulingPolicy
}

// masterWith is the sample's master template with one container, named container.
func (s Sample) masterWith(container string) corev1.PodTemplateSpec {
	t := *s.Master.DeepCopy()
	t.Spec.Containers = []corev1.Container{{Name: container, Image: s.Image}}
	return t
}

// workerWith is a worker template of one container, named container.
func (s Sample) workerWith(container string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: s.Image}}}}
}

// mpiProgram is the sample as the MPI program MPIJob and HorovodJob share, its workers'
// container named container and its launcher the master.
func (s Sample) mpiProgram(container string) troupev1.MPIProgramSpec {
	launcher := s.masterWith(troupev1.MPILauncherContainer)
	return troupev1.MPIProgramSpec{
		Worker:   troupev1.MPIWorker{Replicas: ptr.To(s.WorkerSets[0]), Template: s.workerWith(container)},
		Launcher: &troupev1.MPILauncher{Template: &launcher}, RunPolicy: s.RunPolicy, SchedulingPolicy: s.SchedulingPolicy,
	}
}

// sampleWorkerSetName is the name of a sample's i-th worker set, in a kind whose sets are named
// (ws0, ws1, ...).
func sampleWorkerSetName(i int) string { return fmt.Sprintf("ws%d", i) }
