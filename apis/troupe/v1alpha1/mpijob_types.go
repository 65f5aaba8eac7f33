package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// MPIWorkerContainer is the container of an MPIJob worker pod; it runs sshd (SSH transport)
	// or the processes the launcher starts in it (KubeExec), and its nvidia.com/gpu limit gives
	// the default slots.
	MPIWorkerContainer = "mpi-worker"
	// MPILauncherContainer is the container of the launcher the operator builds when the spec
	// has no launcher template.
	MPILauncherContainer = "mpi-launcher"
)

// MPIImplementation names the MPI implementation of a job's images.
// +kubebuilder:validation:Enum=OpenMPI;OpenMPI5;IntelMPI;MPICH
type MPIImplementation string

// MPIWorker is the worker pods of an MPIJob or HorovodJob, run as the StatefulSet <job>-worker.
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy == 'Always'",message="template.spec.restartPolicy: a StatefulSet's pods restart Always"
type MPIWorker struct {
	// replicas is the number of worker pods. Default 1. Suspend the job to stop its workers.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// template is the worker pod. It must contain the kind's main container ("mpi-worker" for
	// an MPIJob, "horovod" for a HorovodJob). With the SSH transport that container's command
	// is replaced by sshd: the processes are started by the launcher.
	Template corev1.PodTemplateSpec `json:"template"`

	// slots is the number of MPI processes per worker pod. Default: the nvidia.com/gpu limit
	// of the main container, else 1.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Slots *int32 `json:"slots,omitempty"`

	// cmd is the program mpirun starts, when the operator builds the launcher.
	// +optional
	Cmd []string `json:"cmd,omitempty"`

	// extraMPIArgs are given to mpirun before cmd, when the operator builds the launcher.
	// +optional
	ExtraMPIArgs []string `json:"extraMPIArgs,omitempty"`
}

// MPILauncher is the launcher of an MPIJob: a batch Job of one pod that runs mpirun.
// +kubebuilder:validation:XValidation:rule="!has(self.template) || !has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy != 'Always'",message="template.spec.restartPolicy: a batch Job's pod cannot restart Always; use Never or OnFailure"
type MPILauncher struct {
	// template is the launcher pod; its command runs mpirun and finds the hostfile and the
	// transport through the environment. Unset: the operator builds the launcher from the
	// worker's image and runs mpirun with mca, worker.extraMPIArgs and worker.cmd.
	// +optional
	Template *corev1.PodTemplateSpec `json:"template,omitempty"`

	// backoffLimit is how many times the launcher pod is retried before the job fails.
	// Default: runPolicy.backoffLimit, else 6.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// activeDeadlineSeconds bounds the launcher's run time. Default: runPolicy's, else none.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
}

// MPIJobSpec is the desired state of an MPIJob.
// +kubebuilder:validation:XValidation:rule="self.worker.template.spec.containers.exists(c, c.name == 'mpi-worker')",message="worker.template.spec.containers must contain a container named \"mpi-worker\""
type MPIJobSpec struct {
	MPIProgramSpec `json:",inline"`
}

// MPIProgramSpec is what MPIJob and HorovodJob share: a launcher running an MPI program on a
// set of worker pods.
// +kubebuilder:validation:XValidation:rule="!has(self.ssh) || !has(self.ssh.secretName) || !has(self.transport) || self.transport == 'SSH'",message="the KubeExec transport uses no SSH keys; set transport SSH or remove ssh.secretName",fieldPath=".ssh.secretName"
type MPIProgramSpec struct {
	// worker is the worker pods.
	Worker MPIWorker `json:"worker"`

	// launcher is the pod that runs mpirun. Optional: see MPILauncher.template.
	// +optional
	Launcher *MPILauncher `json:"launcher,omitempty"`

	// mca are Open MPI MCA parameters, given to the generated mpirun as --mca key value.
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z][a-z0-9]*(_[a-z0-9]+)*$'))",message="keys must be Open MPI parameter names such as btl or btl_tcp_if_include"
	// +optional
	MCA map[string]string `json:"mca,omitempty"`

	// mpiImplementation is the MPI of the images: OpenMPI (the default), OpenMPI5, IntelMPI or
	// MPICH. It sets the hostfile format and the environment the launcher reads.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cannot change once the job exists"
	// +optional
	MPIImplementation MPIImplementation `json:"mpiImplementation,omitempty"`

	// MPILaunch sets the transport (default SSH), SSH options and the launcher's wait.
	MPILaunch `json:",inline"`

	// mpiHome is where MPI is installed in the images; the generated mpirun uses it as its
	// --prefix (Open MPI), so remote daemons are found without PATH set up for ssh sessions.
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must be an absolute path"
	// +optional
	MPIHome string `json:"mpiHome,omitempty"`

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

// MPIJob runs an MPI program: a launcher (a batch Job running mpirun) and a set of worker pods
// (a StatefulSet) it starts the processes on. The name bound keeps the StatefulSet
// <name>-worker within 52 characters (its pods' controller-revision-hash label).
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 45",message="metadata.name: must be no more than 45 characters so that the StatefulSet <name>-worker fits in 52"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.worker.replicas,statuspath=.status.workerReplicas,selectorpath=.status.workerSelector
// +kubebuilder:resource:shortName=mpij,categories=troupe
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.workers`,description="Ready worker pods / desired"
// +kubebuilder:printcolumn:name="MPI",type=string,JSONPath=`.spec.mpiImplementation`,priority=1
// +kubebuilder:printcolumn:name="Transport",type=string,JSONPath=`.spec.transport`,priority=1
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTime`,priority=1
// +kubebuilder:printcolumn:name="Completed",type=date,JSONPath=`.status.completionTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MPIJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MPIJobSpec `json:"spec,omitempty"`
	Status JobStatus  `json:"status,omitempty"`
}

// MPIJobList is a list of MPIJobs.
// +kubebuilder:object:root=true
type MPIJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MPIJob `json:"items"`
}

// JobStatus lets the shared engine read and write the status every troupe kind shares.
func (j *MPIJob) JobStatus() *JobStatus { return &j.Status }
