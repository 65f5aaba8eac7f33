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
	// slots is the number of MPI processes per pod of this set. Default: the accelerators (a
	// GPU of any vendor, Gaudi, Neuron, TPU) the "chainer" container is limited to, else 1. At
	// most 1024.
	// A CEL rule rather than an OpenAPI minimum: under spec.workerSets the API server reports
	// an OpenAPI bound at spec.workerSets.<set>.mpiConfig.slots but a CEL rule, as the webhook,
	// at spec.workerSets[<set>].mpiConfig.slots; one spelling for every refusal.
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="must be 1 or more"
	// +kubebuilder:validation:XValidation:rule="self <= 1024",message="must be no more than 1024 MPI processes per pod"
	// +optional
	Slots *int32 `json:"slots,omitempty"`
}

// ChainerMaster is the ChainerJob's master: a batch Job of one pod that runs mpiexec and is
// itself the first MPI host (rank 0).
// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.exists(c, c.name == 'chainer')",fieldPath=".template.spec.containers",reason=FieldValueRequired,message="must contain a container named \"chainer\": it runs the job's processes"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy != 'Always'",fieldPath=".template.spec.restartPolicy",message="a batch Job's pod cannot restart Always; use Never or OnFailure"
// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.all(c, has(c.image) && c.image.size() > 0)",messageExpression="'spec.master.template.spec.containers[%d].image: every container needs an image'.format([self.template.spec.containers.map(c, has(c.image) && c.image.size() > 0).indexOf(false)])",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.initContainers) || self.template.spec.initContainers.all(c, has(c.image) && c.image.size() > 0)",message="spec.master.template.spec.initContainers: every init container needs an image",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.all(c, !has(c.resources) || !has(c.resources.requests) || !('nvidia.com/gpu' in c.resources.requests) || (has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits))",messageExpression="'spec.master.template.spec.containers[%d].resources.limits[nvidia.com/gpu]: nvidia.com/gpu is an extended resource: set a limit equal to the request'.format([self.template.spec.containers.map(c, !has(c.resources) || !has(c.resources.requests) || !('nvidia.com/gpu' in c.resources.requests) || (has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits)).indexOf(false)])",reason=FieldValueRequired
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

// A worker set's template has no CEL rules over its containers (the "chainer" container,
// images, GPU limits), unlike the master's: such a rule costs about 1.7 million units for one
// template of the API server's worst-case container list (about 240,000 containers in a 3 MiB
// request), and a rule under spec.workerSets counts once per possible set (32), well past the
// 10 million a rule may cost. The admission webhook checks them; docs/admission.md lists them.

// ChainerWorkerSet is one group of identical worker pods, run as a StatefulSet named
// <job>-workerset-<name>, where name is the set's key in spec.workerSets. Worker sets of one
// job may differ in image, resources and slots (heterogeneous workers).
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy == 'Always'",fieldPath=".template.spec.restartPolicy",message="a StatefulSet's pods restart Always"
type ChainerWorkerSet struct {
	// replicas is the number of worker pods in this set. Default 1. Suspend the job to stop
	// its workers. The job's pods, master included, are at most 4096. (CEL rules rather than
	// OpenAPI bounds: see MPIConfig.slots.)
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="must be 1 or more; suspend the job to stop its workers"
	// +kubebuilder:validation:XValidation:rule="self <= 4095",message="must be no more than 4095: a job has at most 4096 pods, the master included"
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
// +kubebuilder:validation:XValidation:rule="!has(self.backend) || self.backend != 'none' || !has(self.workerSets) || size(self.workerSets) == 0",fieldPath=".workerSets",reason=FieldValueForbidden,message="backend \"none\" runs the master alone: remove the worker sets or use backend \"mpi\""
// +kubebuilder:validation:XValidation:rule="!has(self.schedulingPolicy) || !has(self.schedulingPolicy.minAvailable) || self.schedulingPolicy.minAvailable <= 1 + (has(self.workerSets) ? self.workerSets.map(k, has(self.workerSets[k].replicas) ? self.workerSets[k].replicas : 1).sum() : 0)",fieldPath=".schedulingPolicy.minAvailable",messageExpression="\"must be between 1 and the job's %d pods (the master and every worker)\".format([1 + (has(self.workerSets) ? self.workerSets.map(k, has(self.workerSets[k].replicas) ? self.workerSets[k].replicas : 1).sum() : 0)])"
// +kubebuilder:validation:XValidation:rule="(has(self.workerSets) ? self.workerSets.size() : 0) == (has(oldSelf.workerSets) ? oldSelf.workerSets.size() : 0) && (!has(self.workerSets) || self.workerSets.all(k, has(oldSelf.workerSets) && k in oldSelf.workerSets))",fieldPath=".workerSets",reason=FieldValueForbidden,message="worker sets cannot be added, removed or renamed once the job exists; change their replicas instead"
// +kubebuilder:validation:XValidation:rule="(has(self.runPolicy) && has(self.runPolicy.failurePolicy)) ? (has(oldSelf.runPolicy) && has(oldSelf.runPolicy.failurePolicy) && self.runPolicy.failurePolicy == oldSelf.runPolicy.failurePolicy) : !(has(oldSelf.runPolicy) && has(oldSelf.runPolicy.failurePolicy))",message="runPolicy.failurePolicy: cannot change once the job exists"
// +kubebuilder:validation:XValidation:rule="(has(self.runPolicy) && has(self.runPolicy.storage)) ? (has(oldSelf.runPolicy) && has(oldSelf.runPolicy.storage) && self.runPolicy.storage == oldSelf.runPolicy.storage) : !(has(oldSelf.runPolicy) && has(oldSelf.runPolicy.storage))",message="runPolicy.storage: cannot change once the job exists"
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",fieldPath=".managedBy",message="cannot change once the job exists"
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

	// managedBy names the controller that runs the job, at the place Kueue's MultiKueue reads
	// it for a kind it does not know (its generic adapter reads and, on the copy it makes in a
	// worker cluster, removes spec.managedBy): "kueue.x-k8s.io/multikueue" on a manager
	// cluster lets Kueue dispatch the job to a worker cluster, and this cluster runs none of its
	// pods. Any other value but troupe's is another controller's, as runPolicy.managedBy; give
	// one of the two, or the same value in both. It cannot change. See docs/kueue.md.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`

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
// The name is a DNS-1035 label (it names the headless Service), and short enough for the names
// derived from it: the master Job <name>-master (63) and each StatefulSet
// <name>-workerset-<set> (52, for its pods' controller-revision-hash label <sts>-<10-character
// hash>); the pods' host names <sts>-<ordinal> then fit in 63 for any replica count. The
// messages give the limits computed for this job, as the webhook's do (webhooks/names.go).
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name: must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter and ending with a letter or digit (the job's name is also its headless Service's)",fieldPath=".metadata"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 56",fieldPath=".metadata",messageExpression="'metadata.name: must be no more than 56 characters: the master Job \"%s-master\" would have %d characters, more than 63'.format([self.metadata.name, self.metadata.name.size() + 7])"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.workerSets) || self.spec.workerSets.all(k, self.metadata.name.size() + k.size() <= 41)",fieldPath=".spec.workerSets",messageExpression="'spec.workerSets[%s]: StatefulSet \"%s-workerset-%s\" would have %d characters, more than 52: %s'.format([self.spec.workerSets.filter(k, self.metadata.name.size() + k.size() > 41)[0], self.metadata.name, self.spec.workerSets.filter(k, self.metadata.name.size() + k.size() > 41)[0], self.metadata.name.size() + 11 + self.spec.workerSets.filter(k, self.metadata.name.size() + k.size() > 41)[0].size(), self.metadata.name.size() >= 41 && self.spec.workerSets.filter(k, self.metadata.name.size() + k.size() > 41)[0].size() >= 41 ? 'the job name and the worker set name may have 41 characters together' : self.metadata.name.size() >= 41 ? 'with this worker set, metadata.name may have at most %d characters'.format([41 - self.spec.workerSets.filter(k, self.metadata.name.size() + k.size() > 41)[0].size()]) : self.spec.workerSets.filter(k, self.metadata.name.size() + k.size() > 41)[0].size() >= 41 ? 'with this job name, the worker set name may have at most %d characters'.format([41 - self.metadata.name.size()]) : 'shorten metadata.name to at most %d characters or the worker set name to at most %d'.format([41 - self.spec.workerSets.filter(k, self.metadata.name.size() + k.size() > 41)[0].size(), 41 - self.metadata.name.size()])])"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=chj,categories=troupe
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.workers`,description="Ready worker pods / desired"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,description="What holds the job or ended it"
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress.percent`,description="Percent of the training done, as it reports it"
// +kubebuilder:printcolumn:name="ETA",type=string,JSONPath=`.status.progress.remaining`,description="Time left at the reported rate, as of the last report"
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

func init() { registerKind(&ChainerJob{}, &ChainerJobList{}) }
