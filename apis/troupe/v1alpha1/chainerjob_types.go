package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ChainerMainContainer is the container of a ChainerJob pod that runs the training code; its
// nvidia.com/gpu limit gives the default MPI slots of the pod.
const ChainerMainContainer = "chainer"

// ChainerBackend says how a ChainerJob's processes communicate.
// +kubebuilder:validation:Enum=mpi;none
type ChainerBackend string

const (
	// ChainerBackendMPI wires the master and the workers together with an MPI hostfile.
	ChainerBackendMPI ChainerBackend = "mpi"
	// ChainerBackendNone runs the master alone, for non-distributed training.
	ChainerBackendNone ChainerBackend = "none"
)

// MPIConfig tunes how MPI places processes on one replica set's pods.
type MPIConfig struct {
	// slots is the number of MPI processes per pod of this set. Default: the nvidia.com/gpu
	// limit of the "chainer" container, else 1.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Slots *int32 `json:"slots,omitempty"`
}

// ChainerMaster is the ChainerJob's master: a batch Job of one pod that runs mpiexec and is
// itself the first MPI host (rank 0).
// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.exists(c, c.name == 'chainer')",message="template.spec.containers must contain a container named \"chainer\""
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy != 'Always'",message="template.spec.restartPolicy: a batch Job's pod cannot restart Always; use Never or OnFailure"
type ChainerMaster struct {
	// template is the master pod. It must contain a container named "chainer".
	Template corev1.PodTemplateSpec `json:"template"`

	// backoffLimit is how many times the master pod is retried before the job fails.
	// Default: runPolicy.backoffLimit, else 6.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// activeDeadlineSeconds bounds the master's run time; the job fails once it is reached.
	// Default: runPolicy.activeDeadlineSeconds, else unbounded.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// mpiConfig sets the master's MPI slots.
	// +optional
	MPIConfig *MPIConfig `json:"mpiConfig,omitempty"`
}

// The "chainer" container rule of a worker set is not a CEL rule: over a list of worker sets
// of unbounded container lists its estimated cost exceeds the API server's budget, so the
// operator (and the admission webhook) check it instead.

// ChainerWorkerSet is one group of identical worker pods, run as a StatefulSet named
// <job>-workerset-<name>. Worker sets of one job may differ in image, resources and slots
// (heterogeneous workers).
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy == 'Always'",message="template.spec.restartPolicy: a StatefulSet's pods restart Always"
type ChainerWorkerSet struct {
	// name identifies the set within the job; it is part of the StatefulSet's and the pods'
	// host names, so it must be a DNS label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// replicas is the number of worker pods in this set. Default 1. Suspend the job to stop
	// its workers.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// mpiConfig sets the MPI slots of each pod of this set.
	// +optional
	MPIConfig *MPIConfig `json:"mpiConfig,omitempty"`

	// template is the worker pod. It must contain a container named "chainer".
	Template corev1.PodTemplateSpec `json:"template"`
}

// ChainerJobSpec is the desired state of a ChainerJob.
// +kubebuilder:validation:XValidation:rule="!has(self.ssh) || !has(self.ssh.secretName) || (has(self.transport) && self.transport == 'SSH')",message="only the SSH transport uses SSH keys (a ChainerJob's default is KubeExec); set transport SSH or remove ssh.secretName",fieldPath=".ssh.secretName"
type ChainerJobSpec struct {
	// backend is how the processes communicate: mpi (the default) wires the master and the
	// workers with an MPI hostfile; none runs the master alone. It cannot change.
	// +kubebuilder:default=mpi
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cannot change once the job exists"
	// +optional
	Backend ChainerBackend `json:"backend,omitempty"`

	// MPILaunch sets the transport (default KubeExec), SSH options and the launcher's wait for
	// its workers; it applies when backend is mpi.
	MPILaunch `json:",inline"`

	// master is the pod that runs the training entry point (mpiexec) as a batch Job.
	Master ChainerMaster `json:"master"`

	// workerSets are zero or more groups of worker pods, each run as a StatefulSet. The list is
	// keyed by name, so server-side apply and strategic merge patches address one set.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	WorkerSets []ChainerWorkerSet `json:"workerSets,omitempty"`

	// runPolicy is the lifecycle policy shared by every troupe kind.
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`

	// schedulingPolicy says how the job's pods are admitted by the scheduler.
	// +optional
	SchedulingPolicy SchedulingPolicy `json:"schedulingPolicy,omitempty"`

	// appCodesToSync are git repositories cloned into every pod of the job before its
	// containers start (kube-openmpi's appCodesToSync), each mounted at its mountPath in every
	// container. They cannot change once the job exists.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.mountPath == a.mountPath))",message="mountPath must differ between repositories"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cannot change once the job exists"
	// +optional
	AppCodesToSync []AppCode `json:"appCodesToSync,omitempty"`
}

// ChainerJob runs a Chainer or ChainerMN training: one master pod (a batch Job) and zero or
// more heterogeneous worker sets (StatefulSets) wired together by MPI.
// The name bound keeps derived names within DNS label limits: the master Job <name>-master
// (63), and with worker sets the StatefulSets <name>-workerset-<set> (52, for the pods'
// controller-revision-hash label).
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= (has(self.spec.workerSets) && self.spec.workerSets.size() > 0 ? 40 : 56)",message="metadata.name: must be no more than 40 characters (56 without worker sets) so that derived StatefulSet, Job and pod host names fit"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=chj,categories=troupe
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.workers`,description="Ready worker pods / desired"
// +kubebuilder:printcolumn:name="Backend",type=string,JSONPath=`.spec.backend`,priority=1
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTime`,priority=1
// +kubebuilder:printcolumn:name="Completed",type=date,JSONPath=`.status.completionTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ChainerJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ChainerJobSpec `json:"spec,omitempty"`
	Status JobStatus      `json:"status,omitempty"`
}

// ChainerJobList is a list of ChainerJobs.
// +kubebuilder:object:root=true
type ChainerJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ChainerJob `json:"items"`
}

// JobStatus lets the shared engine read and write the status every troupe kind shares.
func (j *ChainerJob) JobStatus() *JobStatus { return &j.Status }
