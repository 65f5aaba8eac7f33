package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Status fields of the T9k MPIJob (status.tasks, status.aggregate) and of chainer-operator
// (status.succeeded), reported by every kind beside troupe's own.

// TaskStatus is the state of one replica type's pods.
type TaskStatus struct {
	// type is the replica type: launcher (MPIJob, HorovodJob) or master (ChainerJob), or worker.
	Type ReplicaType `json:"type"`
	// restartCount is the sum of the container restarts of the type's current pods.
	RestartCount int32 `json:"restartCount"`
	// status lists the type's current pods, by name: at most 64 of the master (launcher) and
	// 4096 of the workers, those not ended first.
	// +kubebuilder:validation:MaxItems=4096
	// +optional
	Status []PodReference `json:"status,omitempty"`
	// unlisted counts the type's pods that status does not list for the bound.
	// +optional
	Unlisted int32 `json:"unlisted,omitempty"`
}

// PodReference is one pod of a job and its phase.
type PodReference struct {
	// name is the pod's name.
	Name string `json:"name"`
	// uid is the pod's UID.
	UID types.UID `json:"uid"`
	// phase is the pod's phase (Pending, Running, Succeeded, Failed, Unknown).
	Phase corev1.PodPhase `json:"phase"`
}

// Aggregate counts the job's replicas by state, as T9k reports them. Each replica counts once.
type Aggregate struct {
	// creating are replicas the job wants whose pod does not exist yet.
	Creating int32 `json:"creating"`
	// pending are pods accepted but not running yet (scheduling, pulling images, init
	// containers).
	Pending int32 `json:"pending"`
	// running are pods running.
	Running int32 `json:"running"`
	// succeeded are pods that ended with exit code 0.
	Succeeded int32 `json:"succeeded"`
	// failed are pods that ended in failure.
	Failed int32 `json:"failed"`
	// deleted are pods being deleted (they have a deletion timestamp and have not ended).
	Deleted int32 `json:"deleted"`
	// unknown are pods whose state cannot be read.
	Unknown int32 `json:"unknown"`
}

const (
	// JobPaused: runMode.pause.enabled is set; the job's pods are deleted or being deleted.
	JobPaused JobPhase = "Paused"
	// JobResuming: pause was cleared; the replicas are being brought back and the master is
	// not running yet.
	JobResuming JobPhase = "Resuming"
)

// Conditions of the run modes and of the seeds' status.
const (
	// ConditionPaused is True while runMode.pause.enabled is set.
	ConditionPaused = "Paused"
	// ConditionCompleted is True once the job ended, whatever the result (T9k): its reason is
	// Succeeded or Failed.
	ConditionCompleted = "Completed"
	// ConditionComplete is True once the job succeeded, as for a batch Job, so that
	// `kubectl wait --for=condition=Complete` works (chainer-operator).
	ConditionComplete = "Complete"
)

// Condition reasons of the run modes and of the seeds' status.
const (
	ReasonPaused       = "PauseEnabled"
	ReasonResumed      = "Resumed"
	ReasonNotPaused    = "NotPaused"
	ReasonNotCompleted = "NotCompleted"
	ReasonSucceeded    = "Succeeded"
	ReasonFailed       = "Failed"
)

// Event reasons of the run modes.
const (
	EventPaused   = "Paused"
	EventResuming = "Resuming"
)
