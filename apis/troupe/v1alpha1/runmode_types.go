package v1alpha1

import "strconv"

// Run modes and the scheduler section of the T9k MPIJob: debug (bring the environment up
// without training) and pause (delete the replicas, keep the job), and spec.scheduler, which
// troupe maps onto its own schedulingPolicy.

// ReplicaType names a kind of replica of a job in runMode and status.tasks: "launcher" or
// "worker" for MPIJob and HorovodJob (as T9k writes them), "master" or "worker" for ChainerJob.
type ReplicaType string

const (
	// ReplicaLauncher is the launcher of an MPIJob or HorovodJob.
	ReplicaLauncher ReplicaType = "launcher"
	// ReplicaMaster is the master of a ChainerJob.
	ReplicaMaster ReplicaType = "master"
	// ReplicaWorker is every worker pod of a job.
	ReplicaWorker ReplicaType = "worker"
)

// RunMode changes how the job's replicas run, without changing their templates. Each kind
// says which replica types it has (a CEL rule on its runMode field).
type RunMode struct {
	// debug brings the job's environment up without starting the training: the launcher runs
	// `sleep inf` and the workers run what lets the launcher reach them (sshd with the SSH
	// transport, `sleep inf` with KubeExec), unless replicaSpecs says otherwise. It cannot
	// change once the job exists.
	// +optional
	Debug *DebugMode `json:"debug,omitempty"`

	// pause deletes the job's replicas (pods) and keeps the job; clearing pause.enabled brings
	// them back, with pause.resumeSpecs applied. pause.enabled may change at any time.
	// +optional
	Pause *PauseMode `json:"pause,omitempty"`
}

// DebugMode runs every replica with a debug command instead of its own.
type DebugMode struct {
	// enabled turns debug mode on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// replicaSpecs configure each replica type; a type without an entry gets the defaults.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=2
	// +optional
	ReplicaSpecs []DebugReplicaSpec `json:"replicaSpecs,omitempty"`
}

// DebugReplicaSpec is how one replica type runs in debug mode.
type DebugReplicaSpec struct {
	// type is the replica type: launcher or worker.
	Type ReplicaType `json:"type"`

	// skipInitContainer removes the replica's init containers, the operator's own (the
	// launcher's wait for its workers) included.
	// +optional
	SkipInitContainer bool `json:"skipInitContainer,omitempty"`

	// command replaces the command of the replica's main container (its args are dropped).
	// Default: launcher `sleep inf`; worker the transport's sshd (SSH) or `sleep inf`
	// (KubeExec).
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Command []string `json:"command,omitempty"`
}

// PauseMode deletes the job's replicas while enabled.
type PauseMode struct {
	// enabled pauses the job: its pods are deleted, the job and its other children stay.
	// Clearing it resumes the job.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// resumeSpecs say how each replica type runs once the job resumes from a pause; a type
	// without an entry runs its template as written. They cannot change once the job exists:
	// set them when you create the job.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=2
	// +optional
	ResumeSpecs []ResumeSpec `json:"resumeSpecs,omitempty"`
}

// ResumeSpec is how one replica type runs after a pause.
type ResumeSpec struct {
	// type is the replica type: launcher or worker.
	Type ReplicaType `json:"type"`

	// skipInitContainer removes the replica's init containers, the operator's own included.
	// +optional
	SkipInitContainer bool `json:"skipInitContainer,omitempty"`

	// command replaces the command of the replica's main container. Default: the template's.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Command []string `json:"command,omitempty"`

	// args replace the args of the replica's main container. Default: the template's.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Args []string `json:"args,omitempty"`
}

// SchedulerSpec is the T9k MPIJob's scheduler section. troupe has no scheduler of its own:
// it maps the section onto schedulingPolicy and the job's gang provider.
type SchedulerSpec struct {
	// t9kScheduler asks for a queue and a priority.
	// +optional
	T9kScheduler *T9kScheduler `json:"t9kScheduler,omitempty"`
}

// T9kScheduler is a queue and a priority, as the T9k scheduler takes them.
type T9kScheduler struct {
	// queue is the gang provider's queue the job is submitted to: it sets
	// schedulingPolicy.queue (Volcano's PodGroup queue).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Queue string `json:"queue,omitempty"`

	// priority selects the PriorityClass named t9k-priority-<priority> for every pod of the
	// job (schedulingPolicy.priorityClassName); the cluster administrator creates those
	// classes with the values they want.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000000
	// +optional
	Priority *int32 `json:"priority,omitempty"`
}

// T9kPriorityClassPrefix prefixes the PriorityClass name a t9kScheduler priority maps to.
const T9kPriorityClassPrefix = "t9k-priority-"

// FoldInto returns the scheduling policy with the T9k scheduler section folded in: its queue
// becomes the gang provider's queue and its priority the PriorityClass t9k-priority-<priority>,
// where the policy does not name them itself (the CRD refuses the two when they disagree). The
// defaulting webhook writes the result into the stored spec; the adapter folds again for jobs
// stored without the webhook. A nil section changes nothing.
func (s *SchedulerSpec) FoldInto(sp SchedulingPolicy) SchedulingPolicy {
	if s == nil || s.T9kScheduler == nil {
		return sp
	}
	t := s.T9kScheduler
	if sp.Queue == "" {
		sp.Queue = t.Queue
	}
	if sp.PriorityClassName == "" && t.Priority != nil {
		sp.PriorityClassName = T9kPriorityClassName(*t.Priority)
	}
	return sp
}

// T9kPriorityClassName is the PriorityClass a t9kScheduler priority selects.
func T9kPriorityClassName(priority int32) string {
	return T9kPriorityClassPrefix + strconv.Itoa(int(priority))
}
