package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HorovodMainContainer is the container of a HorovodJob worker pod: it runs sshd (SSH
// transport) or the processes the launcher starts in it, and its nvidia.com/gpu limit gives
// the default slots.
const HorovodMainContainer = "horovod"

// HorovodElastic makes a HorovodJob elastic: the launcher runs elastic Horovod (horovodrun
// with a host discovery script), and workers may come and go between the bounds without the
// launcher restarting.
type HorovodElastic struct {
	// minReplicas is the fewest worker pods training continues with.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4095
	MinReplicas int32 `json:"minReplicas"`

	// maxReplicas is the most worker pods training grows to.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4095
	MaxReplicas int32 `json:"maxReplicas"`
}

// HorovodJobSpec is the desired state of a HorovodJob: MPIJob's shape with Horovod's defaults.
// +kubebuilder:validation:XValidation:rule="has(self.worker)",fieldPath=".worker",reason=FieldValueRequired,message="the worker pods are required"
// +kubebuilder:validation:XValidation:rule="!has(self.worker) || self.worker.template.spec.containers.exists(c, c.name == 'horovod')",fieldPath=".worker.template.spec.containers",reason=FieldValueRequired,message="must contain a container named \"horovod\": it runs the job's processes"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic) || self.elastic.minReplicas <= self.elastic.maxReplicas",fieldPath=".elastic.maxReplicas",message="must not be less than minReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic) || !has(self.worker) || !has(self.worker.replicas) || (self.worker.replicas >= self.elastic.minReplicas && self.worker.replicas <= self.elastic.maxReplicas)",fieldPath=".worker.replicas",message="must lie within elastic.minReplicas and elastic.maxReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic) || !has(self.transport) || self.transport != 'KubeExec'",fieldPath=".transport",reason=FieldValueForbidden,message="elastic Horovod starts its workers with ssh itself: use transport SSH"
// +kubebuilder:validation:XValidation:rule="!has(self.schedulingPolicy) || !has(self.schedulingPolicy.minAvailable) || self.schedulingPolicy.minAvailable <= 1 + (has(self.worker) && has(self.worker.replicas) ? self.worker.replicas : has(self.elastic) ? self.elastic.minReplicas : 1)",fieldPath=".schedulingPolicy.minAvailable",messageExpression="\"must be between 1 and the job's %d pods (the launcher and every worker)\".format([1 + (has(self.worker) && has(self.worker.replicas) ? self.worker.replicas : has(self.elastic) ? self.elastic.minReplicas : 1)])"
// +kubebuilder:validation:XValidation:rule="has(self.elastic) == has(oldSelf.elastic) && (!has(self.elastic) || self.elastic == oldSelf.elastic)",fieldPath=".elastic",reason=FieldValueForbidden,message="cannot change once the job exists"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic) || !has(self.runPolicy) || !has(self.runPolicy.failurePolicy) || (self.runPolicy.failurePolicy.maxRestarts == 0 && (!has(self.runPolicy.failurePolicy.rules) || self.runPolicy.failurePolicy.rules.all(r, r.action == 'Ignore' || r.action == 'FailJob')))",fieldPath=".runPolicy.failurePolicy",message="elastic Horovod keeps training when workers come and go and is not restarted as a whole: maxRestarts must be 0 and a rule may Ignore a lost worker or FailJob"
type HorovodJobSpec struct {
	MPIProgramSpec `json:",inline"`

	// elastic runs elastic Horovod between minReplicas and maxReplicas worker pods. The
	// launcher discovers the workers through /etc/troupe/mpi/discover_hosts.sh, which lists
	// only the ready ones and follows them as they come and go.
	// +optional
	Elastic *HorovodElastic `json:"elastic,omitempty"`
}

// HorovodJob runs a Horovod training: a launcher (a batch Job running mpirun, or horovodrun when
// elastic) and a set of worker pods (a StatefulSet), with what horovodrun adds by default.
// The name is bounded as an MPIJob's is (see MPIJob).
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name: must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter and ending with a letter or digit (the job's name is also its headless Service's)",fieldPath=".metadata"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 45",fieldPath=".metadata",messageExpression="'metadata.name: must be no more than 45 characters: the StatefulSet \"%s-worker\" would have %d characters, more than 52'.format([self.metadata.name, self.metadata.name.size() + 7])"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.worker.replicas,statuspath=.status.workerReplicas,selectorpath=.status.workerSelector
// +kubebuilder:resource:shortName=hvdj,categories=troupe
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.workers`,description="Ready worker pods / desired"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,description="What holds the job or ended it"
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress.percent`,description="Percent of the training done, as it reports it"
// +kubebuilder:printcolumn:name="ETA",type=string,JSONPath=`.status.progress.remaining`,description="Time left at the reported rate, as of the last report"
// +kubebuilder:printcolumn:name="Transport",type=string,JSONPath=`.spec.transport`,priority=1
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTime`,priority=1
// +kubebuilder:printcolumn:name="Completed",type=date,JSONPath=`.status.completionTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HorovodJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HorovodJobSpec `json:"spec,omitempty"`
	Status JobStatus      `json:"status,omitempty"`
}

// HorovodJobList is a list of HorovodJobs.
// +kubebuilder:object:root=true
type HorovodJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HorovodJob `json:"items"`
}

// JobStatus lets the shared engine read and write the status every troupe kind shares.
func (j *HorovodJob) JobStatus() *JobStatus { return &j.Status }

func init() { registerKind(&HorovodJob{}, &HorovodJobList{}) }
