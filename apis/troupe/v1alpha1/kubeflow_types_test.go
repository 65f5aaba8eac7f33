package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func kubeflowJob(worker *ReplicaSpec) *MPIJob {
	pod := func(name string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "mpi:1"}}}}
	}
	j := &MPIJob{Spec: MPIJobSpec{MPIReplicaSpecs: &MPIReplicaSpecs{Launcher: &ReplicaSpec{Template: pod("launcher")}}}}
	if worker != nil {
		worker.Template = pod("worker")
		j.Spec.MPIReplicaSpecs.Worker = worker
	}
	return j
}

// kubeflow's defaults of its form, written as kubeflow writes them, and what troupe derives:
// a worker restartPolicy Never fails a worker at its first restart; the defaults are idempotent.
func TestKubeflowDefaults(t *testing.T) {
	j := kubeflowJob(&ReplicaSpec{Replicas: ptr.To[int32](2)})
	j.SetDefaults(OperatorDefaults{})
	r := j.Spec.MPIReplicaSpecs
	got := []any{*r.Launcher.Replicas, r.Launcher.RestartPolicy, *r.Worker.Replicas, r.Worker.RestartPolicy,
		*j.Spec.SlotsPerWorker, j.Spec.SSHAuthMountPath, *j.Spec.RunPolicy.CleanPodPolicy, *j.Spec.RunPolicy.WorkerRestartLimit,
		j.Spec.LauncherCreationPolicy, j.Spec.MPIImplementation, j.Spec.Transport}
	want := []any{int32(1), ReplicaRestartOnFailure, int32(2), ReplicaRestartNever,
		int32(1), "/root/.ssh", CleanPodPolicyNone, int32(1),
		LauncherAtStartup, MPIImplementation("OpenMPI"), MPITransport("")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	again := j.DeepCopy()
	again.SetDefaults(OperatorDefaults{})
	if diff := cmp.Diff(j, again); diff != "" {
		t.Errorf("defaulting twice changed the job:\n%s", diff)
	}

	// Workers that restart OnFailure keep troupe's limit; a policy the user wrote is kept.
	j = kubeflowJob(&ReplicaSpec{Replicas: ptr.To[int32](2), RestartPolicy: ReplicaRestartOnFailure})
	j.Spec.RunPolicy.CleanPodPolicy = ptr.To(CleanPodPolicyRunning)
	j.SetDefaults(OperatorDefaults{})
	if *j.Spec.RunPolicy.WorkerRestartLimit != DefaultWorkerRestartLimit || *j.Spec.RunPolicy.CleanPodPolicy != CleanPodPolicyRunning {
		t.Errorf("OnFailure workers: restart limit %d, clean-pod policy %s; want %d and the user's Running",
			*j.Spec.RunPolicy.WorkerRestartLimit, *j.Spec.RunPolicy.CleanPodPolicy, DefaultWorkerRestartLimit)
	}
}

// The program a job in kubeflow's form runs: the replicas' restart policies on the pods (a
// StatefulSet's Always for the workers, ExitCode's Never for the launcher), slotsPerWorker as
// the workers' slots, Intel as IntelMPI, and runPolicy.schedulingPolicy where
// spec.schedulingPolicy names nothing.
func TestKubeflowProgram(t *testing.T) {
	j := kubeflowJob(&ReplicaSpec{Replicas: ptr.To[int32](3)})
	j.Spec.MPIReplicaSpecs.Launcher.RestartPolicy = ReplicaRestartExitCode
	j.Spec.MPIReplicaSpecs.Worker.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	j.Spec.SlotsPerWorker = ptr.To[int32](4)
	j.Spec.MPIImplementation = MPIImplementationIntel
	j.Spec.SchedulingPolicy.Queue = "mine"
	j.Spec.RunPolicy.SchedulingPolicy = &KubeflowSchedulingPolicy{
		Queue: "theirs", MinAvailable: ptr.To[int32](2), PriorityClass: "high",
		MinResources: corev1.ResourceList{"cpu": resource.MustParse("4")},
	}
	j.SetDefaults(OperatorDefaults{})
	p, main := j.Spec.ProgramWithDefaults()
	if main != "worker" || *p.Worker.Replicas != 3 || *p.Worker.Slots != 4 || p.Worker.Template.Spec.RestartPolicy != "" {
		t.Errorf("worker: main %q, replicas %d, slots %d, restartPolicy %q; want worker, 3, 4 and the StatefulSet's default",
			main, *p.Worker.Replicas, *p.Worker.Slots, p.Worker.Template.Spec.RestartPolicy)
	}
	if p.Launcher.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("an ExitCode launcher's pod restarts %q, want Never (its pod failure policy decides)", p.Launcher.Template.Spec.RestartPolicy)
	}
	if p.MPIImplementation != MPIImplementationIntelMPI {
		t.Errorf("mpiImplementation Intel runs as %q, want IntelMPI", p.MPIImplementation)
	}
	sp := p.SchedulingPolicy
	if sp.Queue != "mine" || *sp.MinAvailable != 2 || sp.PriorityClassName != "high" || sp.MinResources.Cpu().String() != "4" {
		t.Errorf("scheduling policy %+v: want spec's queue, the rest from runPolicy.schedulingPolicy", sp)
	}
	if j.Spec.SchedulingPolicy.MinAvailable != nil {
		t.Error("defaulting copied runPolicy.schedulingPolicy into spec.schedulingPolicy: a later change of it would be shadowed")
	}

	// No Worker: the launcher alone.
	alone := kubeflowJob(nil)
	alone.SetDefaults(OperatorDefaults{})
	if p, _ := alone.Spec.ProgramWithDefaults(); *p.Worker.Replicas != 0 {
		t.Errorf("a job without Worker has %d workers", *p.Worker.Replicas)
	}
}
