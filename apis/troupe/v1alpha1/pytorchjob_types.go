package v1alpha1

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PyTorchJob is kubeflow training-operator's kubeflow.org/v1 PyTorchJob with only apiVersion
// changed (docs/migrating.md, "kubeflow training-operator"): a Master (rank 0, run as a batch
// Job) and Workers (each a batch Job of one pod, run to completion), or Workers alone, with the
// environment torch.distributed and torchrun read (docs/pytorch.md).

// PyTorchMainContainer is the container of every PyTorchJob pod that runs the training, as in
// kubeflow's PyTorchJob: it gets the port and the environment.
const PyTorchMainContainer = "pytorch"

// PyTorchPortName and PyTorchDefaultPort are the main container's port the master (and an
// elastic job's rendezvous) listens on, by kubeflow's name, added when the container names none.
const (
	PyTorchPortName    = "pytorchjob-port"
	PyTorchDefaultPort = 23456
)

// PyTorchDefaultNprocPerNode is nprocPerNode's default, torchrun's own.
const PyTorchDefaultNprocPerNode = "auto"

// PyTorchReplicaSpecs are a PyTorchJob's Master and Workers. At least one is required.
// +kubebuilder:validation:XValidation:rule="has(self.Master) || has(self.Worker)",message="give the Master, the Worker or both",reason=FieldValueRequired
type PyTorchReplicaSpecs struct {
	// Master is rank 0: one pod, run to completion by the batch Job <job>-master; the job
	// succeeds when it does. Its MASTER_ADDR is the others'.
	// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.replicas == 1",fieldPath=".replicas",message="the master is one pod: replicas must be 1"
	// +kubebuilder:validation:XValidation:rule="!has(self.restartPolicy) || self.restartPolicy != 'Always'",fieldPath=".restartPolicy",message="the master runs to completion as a batch Job, whose pod cannot restart Always: use OnFailure, Never or ExitCode"
	// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.exists(c, c.name == 'pytorch')",fieldPath=".template.spec.containers",reason=FieldValueRequired,message="must contain a container named \"pytorch\": it runs the training"
	// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.all(c, has(c.image) && c.image.size() > 0)",messageExpression="'spec.pytorchReplicaSpecs.Master.template.spec.containers[%d].image: every container needs an image'.format([self.template.spec.containers.map(c, has(c.image) && c.image.size() > 0).indexOf(false)])",reason=FieldValueRequired
	// +optional
	Master *ReplicaSpec `json:"Master,omitempty"`

	// Worker is the other ranks: each pod a batch Job <job>-worker-<i> of its own, run to
	// completion (rank i+1 with a Master, i without). Without a Master the job succeeds once
	// every worker has.
	// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.replicas >= 1",fieldPath=".replicas",message="must be at least 1"
	// +kubebuilder:validation:XValidation:rule="!has(self.restartPolicy) || self.restartPolicy != 'Always'",fieldPath=".restartPolicy",message="a worker runs to completion as a batch Job, whose pod cannot restart Always: use OnFailure, Never or ExitCode"
	// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.exists(c, c.name == 'pytorch')",fieldPath=".template.spec.containers",reason=FieldValueRequired,message="must contain a container named \"pytorch\": it runs the training"
	// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.all(c, has(c.image) && c.image.size() > 0)",messageExpression="'spec.pytorchReplicaSpecs.Worker.template.spec.containers[%d].image: every container needs an image'.format([self.template.spec.containers.map(c, has(c.image) && c.image.size() > 0).indexOf(false)])",reason=FieldValueRequired
	// +optional
	Worker *ReplicaSpec `json:"Worker,omitempty"`
}

// RDZVBackend is torch elastic's rendezvous backend.
// +kubebuilder:validation:Enum=c10d;etcd;etcd-v2
type RDZVBackend string

const (
	RDZVBackendC10D   RDZVBackend = "c10d"
	RDZVBackendETCD   RDZVBackend = "etcd"
	RDZVBackendETCDV2 RDZVBackend = "etcd-v2"
)

// RDZVConf is one key=value of the rendezvous configuration (PET_RDZV_CONF).
type RDZVConf struct {
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key string `json:"key,omitempty"`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Value string `json:"value,omitempty"`
}

// PyTorchElasticPolicy runs the job as torch elastic (torchrun with a rendezvous): the workers
// may come and go between minReplicas and maxReplicas (kubectl scale) without the job
// restarting.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",fieldPath=".maxReplicas",message="must not be less than minReplicas"
type PyTorchElasticPolicy struct {
	// minReplicas is the fewest workers training goes on with (PET_NNODES' lower bound).
	// Default: maxReplicas, else the workers' replicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4095
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most workers training grows to. Default: minReplicas, else the
	// workers' replicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4095
	// +optional
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`

	// rdzvBackend is the rendezvous backend (PET_RDZV_BACKEND): c10d (the default: the first
	// worker hosts it), etcd or etcd-v2 (an etcd of the user's at rdzvHost).
	// +optional
	RDZVBackend *RDZVBackend `json:"rdzvBackend,omitempty"`

	// rdzvPort is the rendezvous port. Default: the workers' pytorchjob-port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	RDZVPort *int32 `json:"rdzvPort,omitempty"`

	// rdzvHost is the rendezvous host. Default: the first worker's host name.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	RDZVHost *string `json:"rdzvHost,omitempty"`

	// rdzvId is the rendezvous id (PET_RDZV_ID).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	RDZVID *string `json:"rdzvId,omitempty"`

	// rdzvConf is the rendezvous configuration (PET_RDZV_CONF, key=value,...).
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	RDZVConf []RDZVConf `json:"rdzvConf,omitempty"`

	// standalone runs torchrun's own rendezvous on each node (PET_STANDALONE).
	// +optional
	Standalone *bool `json:"standalone,omitempty"`

	// nProcPerNode is deprecated by kubeflow in favour of spec.nprocPerNode; give one of them.
	// +kubebuilder:validation:Minimum=1
	// +optional
	NProcPerNode *int32 `json:"nProcPerNode,omitempty"`

	// maxRestarts is how often torchrun restarts the worker group before it fails
	// (PET_MAX_RESTARTS).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxRestarts *int32 `json:"maxRestarts,omitempty"`

	// metrics scale the workers with a HorizontalPodAutoscaler, as kubeflow's: troupe creates
	// one named like the job on its scale subresource, between minReplicas and maxReplicas,
	// with these metrics (autoscaling/v2).
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
}

// PyTorchJobSpec is the desired state of a PyTorchJob: kubeflow's, and troupe's scheduling
// policy.
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy) || has(self.pytorchReplicaSpecs.Worker)",fieldPath=".pytorchReplicaSpecs.Worker",reason=FieldValueRequired,message="must be configured if elastic policy is used"
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy) || !has(self.elasticPolicy.nProcPerNode) || !has(self.nprocPerNode)",fieldPath=".elasticPolicy.nProcPerNode",reason=FieldValueForbidden,message="must not be used with spec.nprocPerNode"
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy) || !has(self.pytorchReplicaSpecs.Worker) || !has(self.pytorchReplicaSpecs.Worker.replicas) || ((!has(self.elasticPolicy.minReplicas) || self.pytorchReplicaSpecs.Worker.replicas >= self.elasticPolicy.minReplicas) && (!has(self.elasticPolicy.maxReplicas) || self.pytorchReplicaSpecs.Worker.replicas <= self.elasticPolicy.maxReplicas))",fieldPath=".pytorchReplicaSpecs.Worker.replicas",message="must lie within elasticPolicy.minReplicas and elasticPolicy.maxReplicas"
// +kubebuilder:validation:XValidation:rule="has(self.elasticPolicy) == has(oldSelf.elasticPolicy)",fieldPath=".elasticPolicy",reason=FieldValueForbidden,message="cannot be added or removed once the job exists"
// +kubebuilder:validation:XValidation:rule="(has(self.elasticPolicy) && has(self.elasticPolicy.metrics) && size(self.elasticPolicy.metrics) > 0) == (has(oldSelf.elasticPolicy) && has(oldSelf.elasticPolicy.metrics) && size(oldSelf.elasticPolicy.metrics) > 0)",fieldPath=".elasticPolicy.metrics",reason=FieldValueForbidden,message="cannot be added or removed once the job exists (they may change): the job's HorizontalPodAutoscaler comes and goes with it"
// +kubebuilder:validation:XValidation:rule="has(self.pytorchReplicaSpecs.Master) == has(oldSelf.pytorchReplicaSpecs.Master)",fieldPath=".pytorchReplicaSpecs.Master",reason=FieldValueForbidden,message="cannot be added or removed once the job exists"
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy) || !has(self.runPolicy) || !has(self.runPolicy.failurePolicy) || (self.runPolicy.failurePolicy.maxRestarts == 0 && (!has(self.runPolicy.failurePolicy.rules) || self.runPolicy.failurePolicy.rules.all(r, r.action == 'Ignore' || r.action == 'FailJob')))",fieldPath=".runPolicy.failurePolicy",message="torch elastic keeps training when workers come and go and is not restarted as a whole: maxRestarts must be 0 and a rule may Ignore a lost worker or FailJob"
// +kubebuilder:validation:XValidation:rule="(has(self.runPolicy) && has(self.runPolicy.storage)) ? (has(oldSelf.runPolicy) && has(oldSelf.runPolicy.storage) && self.runPolicy.storage == oldSelf.runPolicy.storage) : !(has(oldSelf.runPolicy) && has(oldSelf.runPolicy.storage))",message="runPolicy.storage: cannot change once the job exists"
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",fieldPath=".managedBy",message="cannot change once the job exists"
type PyTorchJobSpec struct {
	// managedBy names the controller that runs the job, at the place Kueue's MultiKueue reads
	// it for a kind it does not know (its generic adapter reads and, on the copy it makes in a
	// worker cluster, removes spec.managedBy): "kueue.x-k8s.io/multikueue" on a manager
	// cluster lets Kueue dispatch the job to a worker cluster, and this cluster runs none of its
	// pods. Any other value but troupe's is another controller's, as runPolicy.managedBy; give
	// one of the two, or the same value in both. It cannot change. See docs/kueue.md.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`

	// runPolicy is the lifecycle policy: kubeflow's fields (cleanPodPolicy, default None here
	// as in kubeflow; ttlSecondsAfterFinished, activeDeadlineSeconds, backoffLimit, suspend,
	// schedulingPolicy, managedBy) and troupe's.
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`

	// elasticPolicy runs torch elastic: the workers' count may change between its bounds.
	// +optional
	ElasticPolicy *PyTorchElasticPolicy `json:"elasticPolicy,omitempty"`

	// pytorchReplicaSpecs are the Master and the Workers.
	// +required
	PyTorchReplicaSpecs PyTorchReplicaSpecs `json:"pytorchReplicaSpecs"`

	// nprocPerNode is the processes per pod torchrun starts (PET_NPROC_PER_NODE): auto (the
	// default), cpu, gpu or a number. A number also multiplies WORLD_SIZE.
	// +kubebuilder:validation:XValidation:rule="self in ['auto', 'cpu', 'gpu'] || self.matches('^[1-9][0-9]{0,3}$')",message="must be auto, cpu, gpu or a number of processes from 1 to 9999"
	// +optional
	NprocPerNode *string `json:"nprocPerNode,omitempty"`

	// schedulingPolicy is troupe's: the gang (Volcano, coscheduling), queue and priority, as
	// for every kind; kubeflow's runPolicy.schedulingPolicy fills what it leaves unset.
	// +optional
	SchedulingPolicy SchedulingPolicy `json:"schedulingPolicy,omitempty"`
}

// PyTorchJob runs a PyTorch training: a Master (a batch Job of one pod, rank 0) and Workers
// (a batch Job of one pod each), or Workers alone, with the environment of torch.distributed
// and torchrun. The name is a DNS-1035 label of at most 51 characters: each worker's Job and
// pod hostname is <name>-worker-<i>, a DNS label, and i may reach 4094.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name: must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter and ending with a letter or digit (the job's name is also its headless Service's)",fieldPath=".metadata"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 51",fieldPath=".metadata",messageExpression="'metadata.name: must be no more than 51 characters: the worker Job \"%s-worker-4094\" would have %d characters, more than 63'.format([self.metadata.name, self.metadata.name.size() + 12])"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.pytorchReplicaSpecs.Worker.replicas,statuspath=.status.workerReplicas,selectorpath=.status.workerSelector
// +kubebuilder:resource:shortName=ptj,categories=troupe
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.workers`,description="Ready worker pods / desired"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,description="What holds the job or ended it"
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress.percent`,description="Percent of the training done, as it reports it"
// +kubebuilder:printcolumn:name="ETA",type=string,JSONPath=`.status.progress.remaining`,description="Time left at the reported rate, as of the last report"
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTime`,priority=1
// +kubebuilder:printcolumn:name="Completed",type=date,JSONPath=`.status.completionTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PyTorchJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PyTorchJobSpec `json:"spec,omitempty"`
	Status JobStatus      `json:"status,omitempty"`
}

// PyTorchJobList is a list of PyTorchJobs.
// +kubebuilder:object:root=true
type PyTorchJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PyTorchJob `json:"items"`
}

func init() { registerKind(&PyTorchJob{}, &PyTorchJobList{}) }

// JobStatus lets the shared engine read and write the status every troupe kind shares.
func (j *PyTorchJob) JobStatus() *JobStatus { return &j.Status }

// PyTorchWorkerSetName is the worker set's name (its pod set's, label troupe.dev/worker-set).
const PyTorchWorkerSetName = "worker"

var (
	// PyTorchMasterJob is a PyTorchJob's master, a batch Job (and its pod's hostname).
	PyTorchMasterJob = DerivedName{What: "master Job", Suffix: "-master", Max: MaxChildNameLength}
	// PyTorchLastWorkerJob is the longest name of a worker's batch Job <job>-worker-<i> (and
	// its pod's hostname): the last index a job may have.
	PyTorchLastWorkerJob = DerivedName{What: "worker Job", Suffix: fmt.Sprintf("-%s-%d", PyTorchWorkerSetName, MaxWorkerReplicas-1), Max: MaxChildNameLength}
)

// DerivedNames are the children of a PyTorchJob named from its name alone.
func (*PyTorchJob) DerivedNames() []DerivedName {
	return []DerivedName{PyTorchMasterJob, PyTorchLastWorkerJob}
}

var _ QueuedJob = &PyTorchJob{}

// JobRunPolicy returns the job's run policy.
func (j *PyTorchJob) JobRunPolicy() *RunPolicy { return &j.Spec.RunPolicy }

// JobManagedBy returns spec.managedBy.
func (j *PyTorchJob) JobManagedBy() *string { return j.Spec.ManagedBy }

// SetJobManagedBy sets spec.managedBy.
func (j *PyTorchJob) SetJobManagedBy(v *string) { j.Spec.ManagedBy = v }

// PyTorchPodSetMaster names a PyTorchJob's master pod set.
const PyTorchPodSetMaster = "master"

// PodSets are the master, if the job has one, and the workers, if it has them.
func (j *PyTorchJob) PodSets() []PodSet {
	var sets []PodSet
	if j.Spec.PyTorchReplicaSpecs.Master != nil {
		sets = append(sets, PodSet{Name: PyTorchPodSetMaster, HasTemplate: true})
	}
	if j.Spec.PyTorchReplicaSpecs.Worker != nil {
		sets = append(sets, PodSet{Name: PyTorchWorkerSetName, HasTemplate: true})
	}
	return sets
}

// EditPodSetTemplate edits the master's or the workers' template.
func (j *PyTorchJob) EditPodSetTemplate(name string, edit func(*corev1.PodTemplateSpec)) {
	r := j.Spec.PyTorchReplicaSpecs
	switch {
	case name == PyTorchPodSetMaster && r.Master != nil:
		edit(&r.Master.Template)
	case name == PyTorchWorkerSetName && r.Worker != nil:
		edit(&r.Worker.Template)
	}
}
