package v1alpha1

import (
	"maps"
	"slices"

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
	// limit of the "chainer" container, else 1. At most 1024.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
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

// The "chainer" container rule of a worker set is not a CEL rule: over a map of worker sets
// of unbounded container lists its estimated cost exceeds the API server's budget, so the
// operator (and the admission webhook) check it instead.

// ChainerWorkerSet is one group of identical worker pods, run as a StatefulSet named
// <job>-workerset-<name>, where name is the set's key in spec.workerSets. Worker sets of one
// job may differ in image, resources and slots (heterogeneous workers).
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy == 'Always'",message="template.spec.restartPolicy: a StatefulSet's pods restart Always"
type ChainerWorkerSet struct {
	// replicas is the number of worker pods in this set. Default 1. Suspend the job to stop
	// its workers. The job's pods, master included, are at most 4096.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4095
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
// +kubebuilder:validation:XValidation:rule="!has(self.workerSets) || self.workerSets.map(k, has(self.workerSets[k].replicas) ? self.workerSets[k].replicas : 1).sum() <= 4095",messageExpression="'spec.workerSets: the job would have %d pods, more than 4096 (the master and every worker)'.format([1 + self.workerSets.map(k, has(self.workerSets[k].replicas) ? self.workerSets[k].replicas : 1).sum()])"
// +kubebuilder:validation:XValidation:rule="(has(self.runMode) && has(self.runMode.debug)) ? (has(oldSelf.runMode) && has(oldSelf.runMode.debug) && self.runMode.debug == oldSelf.runMode.debug) : !(has(oldSelf.runMode) && has(oldSelf.runMode.debug))",message="runMode.debug: cannot change once the job exists"
// +kubebuilder:validation:XValidation:rule="(has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.resumeSpecs)) ? (has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.resumeSpecs) && self.runMode.pause.resumeSpecs == oldSelf.runMode.pause.resumeSpecs) : !(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.resumeSpecs))",message="runMode.pause.resumeSpecs: cannot change once the job exists; set them when you create the job"
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

	// workerSets are zero or more groups of worker pods, each run as a StatefulSet
	// <job>-workerset-<key>, keyed by the set's name as chainer-operator writes them
	// (workerSets: {ws0: {replicas: 2, template: ...}}). A name is a DNS label: it is part of
	// the pods' host names. Sets are built, and listed in the hostfile, in sorted name order.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 63 && k.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",message="keys must be worker set names: lower-case DNS labels (letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)"
	// +optional
	WorkerSets map[string]ChainerWorkerSet `json:"workerSets,omitempty"`

	// runPolicy is the lifecycle policy shared by every troupe kind.
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`

	// schedulingPolicy says how the job's pods are admitted by the scheduler.
	// +optional
	SchedulingPolicy SchedulingPolicy `json:"schedulingPolicy,omitempty"`

	// runMode runs the job in debug mode (the environment without the training) or pauses it
	// (its pods deleted, the job kept), as the T9k MPIJob's. Replica types: master and worker
	// (every worker set).
	// +kubebuilder:validation:XValidation:rule="!has(self.debug) || !has(self.debug.replicaSpecs) || self.debug.replicaSpecs.all(r, r.type == 'master' || r.type == 'worker')",message="debug.replicaSpecs: type must be master or worker"
	// +kubebuilder:validation:XValidation:rule="!has(self.pause) || !has(self.pause.resumeSpecs) || self.pause.resumeSpecs.all(r, r.type == 'master' || r.type == 'worker')",message="pause.resumeSpecs: type must be master or worker"
	// +optional
	RunMode *RunMode `json:"runMode,omitempty"`
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
// The name bounds keep derived names within their limits: the master Job <name>-master and its
// pod host name (63), and each StatefulSet <name>-workerset-<set> (52, for the pods'
// controller-revision-hash label; its pods' host names then fit in 63 for any replica count).
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 56",message="metadata.name: must be no more than 56 characters: the master Job \"<name>-master\" must fit in 63 characters"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.workerSets) || self.spec.workerSets.all(k, self.metadata.name.size() + k.size() <= 41)",messageExpression="self.spec.workerSets.map(k, k.size()).max() >= 41 ? 'spec.workerSets: a worker set name of %d characters leaves no room for the job name: StatefulSet <name>-workerset-<set> must fit in 52 characters'.format([self.spec.workerSets.map(k, k.size()).max()]) : 'metadata.name: must be no more than %d characters for this job, so that StatefulSet <name>-workerset-<set> of its longest worker set name (%d characters) fits in 52 characters'.format([41 - self.spec.workerSets.map(k, k.size()).max(), self.spec.workerSets.map(k, k.size()).max()])"
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

// WorkerSetNames returns the names of the job's worker sets in sorted order: the one order in
// which the sets are built, validated and listed in the hostfile.
func (s *ChainerJobSpec) WorkerSetNames() []string {
	return slices.Sorted(maps.Keys(s.WorkerSets))
}
