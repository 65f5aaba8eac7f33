package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// kubeflow's form of MPIJob: mpi-operator's kubeflow.org/v2beta1 MPIJob with only apiVersion
// changed (docs/migrating.md, "kubeflow's MPIJob"). Its launcher and workers run as troupe's
// (a launcher Job, a worker StatefulSet), with kubeflow's runtime contract in the pods: the
// workers' own command (their sshd), one generated key pair mounted at sshAuthMountPath, the
// hostfile at /etc/mpi/hostfile, and the environment and labels kubeflow's images read.

// ReplicaRestartPolicy is a replica's restartPolicy in kubeflow's forms.
// +kubebuilder:validation:Enum=Always;OnFailure;Never;ExitCode
type ReplicaRestartPolicy string

const (
	ReplicaRestartAlways    ReplicaRestartPolicy = "Always"
	ReplicaRestartOnFailure ReplicaRestartPolicy = "OnFailure"
	ReplicaRestartNever     ReplicaRestartPolicy = "Never"
	// ReplicaRestartExitCode retries a pod whose main container exited with a code of 128 or
	// more (killed by a signal: preempted, out of memory) and fails the job on 1 to 127.
	ReplicaRestartExitCode ReplicaRestartPolicy = "ExitCode"
)

// LauncherCreationPolicy says when the launcher of an MPIJob is created.
// +kubebuilder:validation:Enum=AtStartup;WaitForWorkersReady
type LauncherCreationPolicy string

const (
	// LauncherAtStartup creates the launcher with the workers (the default); troupe's launcher
	// waits for its workers to resolve before its command starts.
	LauncherAtStartup LauncherCreationPolicy = "AtStartup"
	// LauncherWaitForWorkersReady creates the launcher once every worker pod is Ready.
	LauncherWaitForWorkersReady LauncherCreationPolicy = "WaitForWorkersReady"
)

// DefaultSSHAuthMountPath is where kubeflow's form mounts the job's key pair by default.
const DefaultSSHAuthMountPath = "/root/.ssh"

// MPIReplicaSpecs are the launcher and the workers of an MPIJob in kubeflow's form.
type MPIReplicaSpecs struct {
	// Launcher is the pod that runs the program (mpirun): a batch Job of one pod, its first
	// container the main one. restartPolicy defaults to OnFailure.
	// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.replicas == 1",fieldPath=".replicas",message="the launcher is one pod: replicas must be 1"
	// +kubebuilder:validation:XValidation:rule="!has(self.restartPolicy) || self.restartPolicy != 'Always'",fieldPath=".restartPolicy",message="the launcher is a batch Job, whose pod cannot restart Always: use OnFailure, Never or ExitCode"
	// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.all(c, has(c.image) && c.image.size() > 0)",messageExpression="'spec.mpiReplicaSpecs.Launcher.template.spec.containers[%d].image: every container needs an image'.format([self.template.spec.containers.map(c, has(c.image) && c.image.size() > 0).indexOf(false)])",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.initContainers) || self.template.spec.initContainers.all(c, has(c.image) && c.image.size() > 0)",message="spec.mpiReplicaSpecs.Launcher.template.spec.initContainers: every init container needs an image",reason=FieldValueRequired
	// +required
	Launcher *ReplicaSpec `json:"Launcher"`

	// Worker is the worker pods, run as the StatefulSet <job>-worker; its first container is
	// the main one and runs its own command (the image's sshd; with neither command nor args,
	// /usr/sbin/sshd -De). Absent, or 0 replicas: the launcher runs alone. restartPolicy
	// defaults to Never: a worker whose containers restart counts as failed at once
	// (runPolicy.workerRestartLimit 1). ExitCode cannot be kept by a StatefulSet.
	// +kubebuilder:validation:XValidation:rule="!has(self.restartPolicy) || self.restartPolicy != 'ExitCode'",fieldPath=".restartPolicy",message="a worker StatefulSet restarts its pods' containers in place whatever their exit code: use Never (a restarted worker fails the job, or restarts it under runPolicy.failurePolicy), OnFailure or Always"
	// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.all(c, has(c.image) && c.image.size() > 0)",messageExpression="'spec.mpiReplicaSpecs.Worker.template.spec.containers[%d].image: every container needs an image'.format([self.template.spec.containers.map(c, has(c.image) && c.image.size() > 0).indexOf(false)])",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.initContainers) || self.template.spec.initContainers.all(c, has(c.image) && c.image.size() > 0)",message="spec.mpiReplicaSpecs.Worker.template.spec.initContainers: every init container needs an image",reason=FieldValueRequired
	// +optional
	Worker *ReplicaSpec `json:"Worker,omitempty"`
}

// ReplicaSpec is one replica type of kubeflow's forms: how many pods, their template and how
// they restart.
type ReplicaSpec struct {
	// replicas is the number of pods, at most 4095. A master's or launcher's is 1; the
	// default of the others is kubeflow's for the kind (an MPIJob's workers 0, a PyTorchJob's
	// replicas 1).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4095
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// template is the pod. Its spec.restartPolicy is set from restartPolicy (a warning says so
	// when it differs).
	// +required
	Template corev1.PodTemplateSpec `json:"template"`

	// restartPolicy is how the pods restart: Always, OnFailure, Never or ExitCode.
	// +optional
	RestartPolicy ReplicaRestartPolicy `json:"restartPolicy,omitempty"`
}

// IsKubeflowForm reports whether the job is written in kubeflow's form (spec.mpiReplicaSpecs).
func (s *MPIJobSpec) IsKubeflowForm() bool { return s.MPIReplicaSpecs != nil }

// KubeflowWorkers is the number of worker pods of a job in kubeflow's form (0 without Worker).
func (s *MPIJobSpec) KubeflowWorkers() int32 {
	if s.MPIReplicaSpecs == nil || s.MPIReplicaSpecs.Worker == nil {
		return 0
	}
	return ptr.Deref(s.MPIReplicaSpecs.Worker.Replicas, 0)
}

// KubeflowContract is what a job in kubeflow's form asks of its pods beyond the program: the
// runtime kubeflow's images expect (docs/migrating.md). Nil for the other forms.
// +kubebuilder:object:generate=false
type KubeflowContract struct {
	// SSHAuthMountPath is where the main containers find id_rsa, id_rsa.pub and authorized_keys.
	SSHAuthMountPath string
	// LauncherRestartPolicy is the launcher's restart policy (ExitCode asks for a pod failure
	// policy).
	LauncherRestartPolicy ReplicaRestartPolicy
}

// setKubeflowDefaults fills kubeflow's defaults of its form: one launcher restarting
// OnFailure, workers 0 and Never, one slot per worker, the key pair at /root/.ssh, the clean-pod
// policy None (or kubeflow.org/v1's spec.cleanPodPolicy); and, from the workers' restartPolicy, the worker restart limit (Never: the first
// restart fails the worker).
func (s *MPIJobSpec) setKubeflowDefaults() {
	r := s.MPIReplicaSpecs
	if l := r.Launcher; l != nil {
		if l.Replicas == nil {
			l.Replicas = ptr.To[int32](1)
		}
		if l.RestartPolicy == "" {
			l.RestartPolicy = ReplicaRestartOnFailure
		}
	}
	if w := r.Worker; w != nil {
		if w.Replicas == nil {
			w.Replicas = ptr.To[int32](0)
		}
		if w.RestartPolicy == "" {
			w.RestartPolicy = ReplicaRestartNever
		}
	}
	if s.SlotsPerWorker == nil {
		s.SlotsPerWorker = ptr.To[int32](1)
	}
	if s.SSHAuthMountPath == "" {
		s.SSHAuthMountPath = DefaultSSHAuthMountPath
	}
	switch {
	case s.RunPolicy.CleanPodPolicy != nil:
	case s.CleanPodPolicy != nil:
		s.RunPolicy.CleanPodPolicy = ptr.To(*s.CleanPodPolicy)
	case s.RunPolicy.CleanUpWorkers == nil:
		s.RunPolicy.CleanPodPolicy = ptr.To(CleanPodPolicyNone)
	}
	if s.RunPolicy.WorkerRestartLimit == nil && r.Worker != nil &&
		(r.Worker.RestartPolicy == ReplicaRestartNever || r.Worker.RestartPolicy == ReplicaRestartExitCode) {
		s.RunPolicy.WorkerRestartLimit = ptr.To[int32](1)
	}
}

// kubeflowProgram is the program of a job in kubeflow's form, in the spec.worker form, and its
// workers' main container (mainContainer, else the first). Without workers the program's worker has 0 replicas and
// no template.
func (s *MPIJobSpec) kubeflowProgram() (MPIProgramSpec, string) {
	p := *s.MPIProgramSpec.DeepCopy()
	r := s.MPIReplicaSpecs
	mainContainer := ""
	p.Worker = MPIWorker{Replicas: ptr.To(s.KubeflowWorkers())}
	if w := r.Worker; w != nil {
		p.Worker.Template = *w.Template.DeepCopy()
		if cs := w.Template.Spec.Containers; len(cs) > 0 {
			mainContainer = cs[0].Name
		}
		if s.MainContainer != "" {
			mainContainer = s.MainContainer
		}
	}
	if s.SlotsPerWorker != nil {
		p.Worker.Slots = ptr.To(*s.SlotsPerWorker)
	}
	p.Launcher = &MPILauncher{}
	if r.Launcher != nil {
		tmpl := r.Launcher.Template.DeepCopy()
		tmpl.Spec.RestartPolicy = r.Launcher.RestartPolicy.PodRestartPolicy(corev1.RestartPolicyOnFailure)
		p.Launcher.Template = tmpl
	}
	if p.MPIImplementation == MPIImplementationIntel {
		p.MPIImplementation = MPIImplementationIntelMPI
	}
	p.SchedulingPolicy = p.RunPolicy.SchedulingPolicy.FoldInto(p.SchedulingPolicy)
	// A StatefulSet's pods restart Always; the workers' restartPolicy is kept by the worker
	// restart limit (setKubeflowDefaults), and the template's own, if any, gives way (kubeflow's
	// replica restartPolicy overrides it too; the webhook warns).
	p.Worker.Template.Spec.RestartPolicy = ""
	return p, mainContainer
}

// PodRestartPolicy is the pod restartPolicy of a replica's: ExitCode runs as Never (the job's
// pod failure policy decides by the exit code), unset as def.
func (rp ReplicaRestartPolicy) PodRestartPolicy(def corev1.RestartPolicy) corev1.RestartPolicy {
	switch rp {
	case "":
		return def
	case ReplicaRestartExitCode:
		return corev1.RestartPolicyNever
	}
	return corev1.RestartPolicy(rp)
}

// Kubeflow is the job's kubeflow runtime contract, nil unless it is in kubeflow's form. Call it
// on a defaulted job.
func (s *MPIJobSpec) Kubeflow() *KubeflowContract {
	r := s.MPIReplicaSpecs
	if r == nil {
		return nil
	}
	c := &KubeflowContract{SSHAuthMountPath: s.SSHAuthMountPath}
	if r.Launcher != nil {
		c.LauncherRestartPolicy = r.Launcher.RestartPolicy
	}
	return c
}

// KubeflowSchedulingPolicy is kubeflow's runPolicy.schedulingPolicy: the gang's minimum, queue,
// priority class, resources and timeout. The program a job runs (Program) takes each from here
// where spec.schedulingPolicy names none; the two may not disagree (the webhook refuses it).
type KubeflowSchedulingPolicy struct {
	// minAvailable is spec.schedulingPolicy.minAvailable.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinAvailable *int32 `json:"minAvailable,omitempty"`

	// queue is spec.schedulingPolicy.queue.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Queue string `json:"queue,omitempty"`

	// minResources is spec.schedulingPolicy.minResources: the resources the gang needs before
	// any of its pods is bound (default: the sum of the requests of minAvailable pods).
	// +optional
	MinResources corev1.ResourceList `json:"minResources,omitempty"`

	// priorityClass is spec.schedulingPolicy.priorityClassName.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClass string `json:"priorityClass,omitempty"`

	// scheduleTimeoutSeconds is spec.schedulingPolicy.scheduleTimeoutSeconds.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// Contradiction is a field of runPolicy.schedulingPolicy that says otherwise than its
// spec.schedulingPolicy counterpart.
// +kubebuilder:object:generate=false
type Contradiction struct {
	Field, SpecField string
	Given, Spec      any
}

// Contradictions lists the fields k gives that sp gives differently: the job would not run as
// one of them says, so both the webhook and the engine refuse it.
func (k *KubeflowSchedulingPolicy) Contradictions(sp *SchedulingPolicy) []Contradiction {
	if k == nil {
		return nil
	}
	var out []Contradiction
	if k.MinAvailable != nil && sp.MinAvailable != nil && *k.MinAvailable != *sp.MinAvailable {
		out = append(out, Contradiction{"minAvailable", "minAvailable", *k.MinAvailable, *sp.MinAvailable})
	}
	if k.Queue != "" && sp.Queue != "" && k.Queue != sp.Queue {
		out = append(out, Contradiction{"queue", "queue", k.Queue, sp.Queue})
	}
	if k.PriorityClass != "" && sp.PriorityClassName != "" && k.PriorityClass != sp.PriorityClassName {
		out = append(out, Contradiction{"priorityClass", "priorityClassName", k.PriorityClass, sp.PriorityClassName})
	}
	if k.ScheduleTimeoutSeconds != nil && sp.ScheduleTimeoutSeconds != nil && *k.ScheduleTimeoutSeconds != *sp.ScheduleTimeoutSeconds {
		out = append(out, Contradiction{"scheduleTimeoutSeconds", "scheduleTimeoutSeconds", *k.ScheduleTimeoutSeconds, *sp.ScheduleTimeoutSeconds})
	}
	if k.MinResources != nil && sp.MinResources != nil && !equality.Semantic.DeepEqual(k.MinResources, sp.MinResources) {
		out = append(out, Contradiction{"minResources", "minResources", k.MinResources, sp.MinResources})
	}
	return out
}

// FoldInto is sp with every field it leaves unset taken from k.
func (k *KubeflowSchedulingPolicy) FoldInto(sp SchedulingPolicy) SchedulingPolicy {
	if k == nil {
		return sp
	}
	if sp.MinAvailable == nil && k.MinAvailable != nil {
		sp.MinAvailable = ptr.To(*k.MinAvailable)
	}
	if sp.Queue == "" {
		sp.Queue = k.Queue
	}
	if sp.MinResources == nil && k.MinResources != nil {
		sp.MinResources = k.MinResources.DeepCopy()
	}
	if sp.PriorityClassName == "" {
		sp.PriorityClassName = k.PriorityClass
	}
	if sp.ScheduleTimeoutSeconds == nil && k.ScheduleTimeoutSeconds != nil {
		sp.ScheduleTimeoutSeconds = ptr.To(*k.ScheduleTimeoutSeconds)
	}
	return sp
}
