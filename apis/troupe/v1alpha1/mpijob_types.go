package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

// MPIImplementation names the MPI implementation of a job's images. Intel is kubeflow's name
// of IntelMPI.
// +kubebuilder:validation:Enum=OpenMPI;OpenMPI5;IntelMPI;Intel;MPICH
type MPIImplementation string

const (
	MPIImplementationOpenMPI  MPIImplementation = "OpenMPI"
	MPIImplementationOpenMPI5 MPIImplementation = "OpenMPI5"
	MPIImplementationIntelMPI MPIImplementation = "IntelMPI"
	MPIImplementationIntel    MPIImplementation = "Intel"
	MPIImplementationMPICH    MPIImplementation = "MPICH"
)

// Every pod template of these kinds carries CEL rules over its containers (images; for worker
// templates an nvidia.com/gpu limit for a request). Each costs between 2 and 12 million of the
// 100 million units of estimated cost one CRD may spend (test/tools/celcost prints them), so
// they are written once per template, not per container list; their messages give the full
// path, as a CEL rule's field path cannot hold a list index. docs/admission.md has the figures.

// MPIWorker is the worker pods of an MPIJob or HorovodJob, run as the StatefulSet <job>-worker.
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy == 'Always'",fieldPath=".template.spec.restartPolicy",message="a StatefulSet's pods restart Always"
// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.all(c, has(c.image) && c.image.size() > 0)",messageExpression="'spec.worker.template.spec.containers[%d].image: every container needs an image'.format([self.template.spec.containers.map(c, has(c.image) && c.image.size() > 0).indexOf(false)])",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.initContainers) || self.template.spec.initContainers.all(c, has(c.image) && c.image.size() > 0)",message="spec.worker.template.spec.initContainers: every init container needs an image",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.template.spec.containers.all(c, !has(c.resources) || !has(c.resources.requests) || !('nvidia.com/gpu' in c.resources.requests) || (has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits))",messageExpression="'spec.worker.template.spec.containers[%d].resources.limits[nvidia.com/gpu]: nvidia.com/gpu is an extended resource: set a limit equal to the request'.format([self.template.spec.containers.map(c, !has(c.resources) || !has(c.resources.requests) || !('nvidia.com/gpu' in c.resources.requests) || (has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits)).indexOf(false)])",reason=FieldValueRequired
type MPIWorker struct {
	// replicas is the number of worker pods. Default 1 (an elastic HorovodJob's: its
	// elastic.minReplicas), at most 4095 (4096 pods with the launcher). Suspend the job to stop
	// its workers.
	// No CRD default: the API server applies it before the defaulting webhook, which could then
	// not tell it from a count the user wrote.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4095
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// template is the worker pod. It must contain the kind's main container ("mpi-worker" for
	// an MPIJob, "horovod" for a HorovodJob). With the SSH transport that container's command
	// is replaced by sshd: the processes are started by the launcher.
	Template corev1.PodTemplateSpec `json:"template"`

	// slots is the number of MPI processes per worker pod. Default: the accelerators (a GPU
	// of any vendor, Gaudi, Neuron, TPU) the main container is limited to, else 1. At most 1024.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
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
// +kubebuilder:validation:XValidation:rule="!has(self.template) || !has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy != 'Always'",fieldPath=".template.spec.restartPolicy",message="a batch Job's pod cannot restart Always; use Never or OnFailure"
// +kubebuilder:validation:XValidation:rule="!has(self.template) || size(self.template.spec.containers) > 0",fieldPath=".template.spec.containers",reason=FieldValueRequired,message="a pod needs at least one container"
// +kubebuilder:validation:XValidation:rule="!has(self.template) || self.template.spec.containers.all(c, has(c.image) && c.image.size() > 0)",messageExpression="'spec.launcher.template.spec.containers[%d].image: every container needs an image'.format([self.template.spec.containers.map(c, has(c.image) && c.image.size() > 0).indexOf(false)])",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.template) || !has(self.template.spec.initContainers) || self.template.spec.initContainers.all(c, has(c.image) && c.image.size() > 0)",message="spec.launcher.template.spec.initContainers: every init container needs an image",reason=FieldValueRequired
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

// MPIJobSpec is the desired state of an MPIJob, written in one of three forms: T9k's
// (spec.worker, with an optional spec.launcher), FFFFFaraway MPI-Operator's (spec.numWorkers,
// spec.launcherTemplate and spec.workerTemplate, whose workers run their own command) or
// kubeflow mpi-operator's (spec.mpiReplicaSpecs; kubeflow_types.go). The operator runs them the
// same way; see Program.
// +kubebuilder:validation:XValidation:rule="has(self.worker) || has(self.workerTemplate) || has(self.mpiReplicaSpecs)",fieldPath=".worker",reason=FieldValueRequired,message="the worker pods are required (or spec.workerTemplate, with spec.numWorkers and spec.launcherTemplate, in the FFFFFaraway form; or spec.mpiReplicaSpecs in kubeflow's form)"
// +kubebuilder:validation:XValidation:rule="!has(self.mpiReplicaSpecs) || !(has(self.worker) || has(self.workerTemplate) || has(self.launcherTemplate) || has(self.numWorkers) || has(self.launcher))",fieldPath=".mpiReplicaSpecs",reason=FieldValueForbidden,message="spec.mpiReplicaSpecs (kubeflow's form) and spec.worker/launcher or spec.numWorkers/launcherTemplate/workerTemplate are forms of the same job: write one of them"
// +kubebuilder:validation:XValidation:rule="has(self.mpiReplicaSpecs) || !has(self.slotsPerWorker)",fieldPath=".slotsPerWorker",reason=FieldValueForbidden,message="belongs to kubeflow's form (spec.mpiReplicaSpecs); in the spec.worker form the slots are spec.worker.slots"
// +kubebuilder:validation:XValidation:rule="has(self.mpiReplicaSpecs) || !has(self.sshAuthMountPath)",fieldPath=".sshAuthMountPath",reason=FieldValueForbidden,message="belongs to kubeflow's form (spec.mpiReplicaSpecs), whose pods get one key pair there; the other forms use troupe's SSH transport (spec.ssh)"
// +kubebuilder:validation:XValidation:rule="has(self.mpiReplicaSpecs) || !has(self.cleanPodPolicy)",fieldPath=".cleanPodPolicy",reason=FieldValueForbidden,message="is kubeflow.org/v1's place of spec.runPolicy.cleanPodPolicy, kept for kubeflow's form (spec.mpiReplicaSpecs): write spec.runPolicy.cleanPodPolicy"
// +kubebuilder:validation:XValidation:rule="!has(self.cleanPodPolicy) || !has(self.runPolicy) || !has(self.runPolicy.cleanPodPolicy) || self.cleanPodPolicy == self.runPolicy.cleanPodPolicy",fieldPath=".cleanPodPolicy",message="contradicts spec.runPolicy.cleanPodPolicy; give it once"
// +kubebuilder:validation:XValidation:rule="has(self.mpiReplicaSpecs) || !has(self.mainContainer)",fieldPath=".mainContainer",reason=FieldValueForbidden,message="belongs to kubeflow's form (spec.mpiReplicaSpecs); in the other forms the main container is the worker template's first (spec.workerTemplate) or the one named mpi-worker"
// +kubebuilder:validation:XValidation:rule="!has(self.mpiReplicaSpecs) || !has(self.transport) || self.transport == 'KubeExec'",fieldPath=".transport",message="kubeflow's form (spec.mpiReplicaSpecs) connects over the workers' own sshd with the key pair at sshAuthMountPath; leave transport unset, or set KubeExec"
// +kubebuilder:validation:XValidation:rule="!has(self.mpiReplicaSpecs) || !has(self.ssh)",fieldPath=".ssh",reason=FieldValueForbidden,message="configures troupe's SSH transport, which kubeflow's form (spec.mpiReplicaSpecs) does not use: its key pair is mounted at sshAuthMountPath"
// +kubebuilder:validation:XValidation:rule="has(self.mpiReplicaSpecs) == has(oldSelf.mpiReplicaSpecs)",reason=FieldValueForbidden,message="the job cannot change to or from kubeflow's form (spec.mpiReplicaSpecs) once it exists"
// +kubebuilder:validation:XValidation:rule="!has(self.worker) || !(has(self.workerTemplate) || has(self.launcherTemplate) || has(self.numWorkers))",fieldPath=".worker",reason=FieldValueForbidden,message="spec.worker and spec.numWorkers/launcherTemplate/workerTemplate are two forms of the same job: write one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.workerTemplate) || !has(self.launcher)",fieldPath=".launcher",reason=FieldValueForbidden,message="belongs to the spec.worker form: with spec.workerTemplate the launcher is spec.launcherTemplate"
// +kubebuilder:validation:XValidation:rule="!has(self.workerTemplate) || has(self.launcherTemplate)",fieldPath=".launcherTemplate",reason=FieldValueRequired,message="its command runs the program (for example horovodrun --hostfile $OMPI_MCA_orte_default_hostfile ...)"
// +kubebuilder:validation:XValidation:rule="!has(self.workerTemplate) || !has(self.transport) || self.transport == 'KubeExec'",fieldPath=".transport",message="the spec.workerTemplate form runs the workers' own commands and reaches them with KubeExec; write the spec.worker form for sshd workers"
// +kubebuilder:validation:XValidation:rule="!has(self.worker) || self.worker.template.spec.containers.exists(c, c.name == 'mpi-worker')",fieldPath=".worker.template.spec.containers",reason=FieldValueRequired,message="must contain a container named \"mpi-worker\": it runs the job's processes"
// +kubebuilder:validation:XValidation:rule="!has(self.schedulingPolicy) || !has(self.schedulingPolicy.minAvailable) || self.schedulingPolicy.minAvailable <= 1 + (has(self.worker) && has(self.worker.replicas) ? self.worker.replicas : has(self.numWorkers) ? self.numWorkers : has(self.mpiReplicaSpecs) ? (has(self.mpiReplicaSpecs.Worker) && has(self.mpiReplicaSpecs.Worker.replicas) ? self.mpiReplicaSpecs.Worker.replicas : 0) : 1)",fieldPath=".schedulingPolicy.minAvailable",messageExpression="\"must be between 1 and the job's %d pods (the launcher and every worker)\".format([1 + (has(self.worker) && has(self.worker.replicas) ? self.worker.replicas : has(self.numWorkers) ? self.numWorkers : has(self.mpiReplicaSpecs) ? (has(self.mpiReplicaSpecs.Worker) && has(self.mpiReplicaSpecs.Worker.replicas) ? self.mpiReplicaSpecs.Worker.replicas : 0) : 1)])"
// +kubebuilder:validation:XValidation:rule="has(self.workerTemplate) == has(oldSelf.workerTemplate)",reason=FieldValueForbidden,message="the job cannot change between the spec.worker form and the spec.workerTemplate form once it exists"
type MPIJobSpec struct {
	MPIProgramSpec `json:",inline"`

	// numWorkers is the number of worker pods in the FFFFFaraway form (spec.worker.replicas in
	// the other). Default 1, at most 4095.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4095
	// +optional
	NumWorkers *int32 `json:"numWorkers,omitempty"`

	// launcherTemplate is the launcher pod in the FFFFFaraway form: its command runs the
	// program, finding the hostfile in $OMPI_MCA_orte_default_hostfile (Open MPI) or
	// $TROUPE_HOSTFILE. Its first container is the main one.
	// +kubebuilder:validation:XValidation:rule="!has(self.spec.restartPolicy) || self.spec.restartPolicy != 'Always'",fieldPath=".spec.restartPolicy",message="a batch Job's pod cannot restart Always; use Never or OnFailure"
	// +kubebuilder:validation:XValidation:rule="size(self.spec.containers) > 0",fieldPath=".spec.containers",reason=FieldValueRequired,message="a pod needs at least one container"
	// +kubebuilder:validation:XValidation:rule="self.spec.containers.all(c, has(c.image) && c.image.size() > 0)",messageExpression="'spec.launcherTemplate.spec.containers[%d].image: every container needs an image'.format([self.spec.containers.map(c, has(c.image) && c.image.size() > 0).indexOf(false)])",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="!has(self.spec.initContainers) || self.spec.initContainers.all(c, has(c.image) && c.image.size() > 0)",message="spec.launcherTemplate.spec.initContainers: every init container needs an image",reason=FieldValueRequired
	// +optional
	LauncherTemplate *corev1.PodTemplateSpec `json:"launcherTemplate,omitempty"`

	// workerTemplate is the worker pod in the FFFFFaraway form. Its containers may have any
	// names; the first is the main one, the container the launcher's processes are started in.
	// It runs its own command, and its readinessProbe gates the launcher: the launcher starts
	// once every worker pod is Ready.
	// +kubebuilder:validation:XValidation:rule="!has(self.spec.restartPolicy) || self.spec.restartPolicy == 'Always'",fieldPath=".spec.restartPolicy",message="a StatefulSet's pods restart Always"
	// +kubebuilder:validation:XValidation:rule="size(self.spec.containers) > 0",fieldPath=".spec.containers",reason=FieldValueRequired,message="a pod needs at least one container"
	// +kubebuilder:validation:XValidation:rule="self.spec.containers.all(c, has(c.image) && c.image.size() > 0)",messageExpression="'spec.workerTemplate.spec.containers[%d].image: every container needs an image'.format([self.spec.containers.map(c, has(c.image) && c.image.size() > 0).indexOf(false)])",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="!has(self.spec.initContainers) || self.spec.initContainers.all(c, has(c.image) && c.image.size() > 0)",message="spec.workerTemplate.spec.initContainers: every init container needs an image",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="self.spec.containers.all(c, !has(c.resources) || !has(c.resources.requests) || !('nvidia.com/gpu' in c.resources.requests) || (has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits))",messageExpression="'spec.workerTemplate.spec.containers[%d].resources.limits[nvidia.com/gpu]: nvidia.com/gpu is an extended resource: set a limit equal to the request'.format([self.spec.containers.map(c, !has(c.resources) || !has(c.resources.requests) || !('nvidia.com/gpu' in c.resources.requests) || (has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits)).indexOf(false)])",reason=FieldValueRequired
	// +optional
	WorkerTemplate *corev1.PodTemplateSpec `json:"workerTemplate,omitempty"`

	// mpiReplicaSpecs is the launcher and the workers in kubeflow's form (mpi-operator's
	// kubeflow.org/v2beta1 MPIJob, with only apiVersion changed): Launcher and Worker, each with
	// replicas, template and restartPolicy. See docs/migrating.md.
	// +optional
	MPIReplicaSpecs *MPIReplicaSpecs `json:"mpiReplicaSpecs,omitempty"`

	// slotsPerWorker is every worker's MPI slots in kubeflow's form. Default 1, at most 1024.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +optional
	SlotsPerWorker *int32 `json:"slotsPerWorker,omitempty"`

	// sshAuthMountPath is where kubeflow's form mounts the job's generated key pair in the main
	// container of every pod (id_rsa, id_rsa.pub, authorized_keys). Default /root/.ssh.
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must be an absolute path"
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	SSHAuthMountPath string `json:"sshAuthMountPath,omitempty"`

	// runLauncherAsWorker makes the launcher a host of the job: the first line of the
	// hostfile, with the workers' slots, so that it runs ranks too. It cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cannot change once the job exists"
	// +optional
	RunLauncherAsWorker *bool `json:"runLauncherAsWorker,omitempty"`

	// launcherCreationPolicy is when the launcher is created: AtStartup (the default), with
	// the workers, or WaitForWorkersReady, once every worker pod is Ready.
	// +optional
	LauncherCreationPolicy LauncherCreationPolicy `json:"launcherCreationPolicy,omitempty"`

	// cleanPodPolicy is kubeflow.org/v1's place of runPolicy.cleanPodPolicy, kept for its
	// manifests (kubeflow's form only): runPolicy.cleanPodPolicy is taken from it when unset,
	// and may not say otherwise.
	// +optional
	CleanPodPolicy *CleanPodPolicy `json:"cleanPodPolicy,omitempty"`

	// mainContainer names the container of the launcher and of the workers that runs the MPI
	// program in kubeflow's form (kubeflow.org/v1's field). Default: each template's first.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	MainContainer string `json:"mainContainer,omitempty"`
}

// IsWorkerTemplateForm reports whether the job is written in the FFFFFaraway form
// (numWorkers, launcherTemplate, workerTemplate).
func (s *MPIJobSpec) IsWorkerTemplateForm() bool { return s.WorkerTemplate != nil }

// LauncherIsWorker reports whether the launcher is a host of the job (runLauncherAsWorker).
func (s *MPIJobSpec) LauncherIsWorker() bool { return ptr.Deref(s.RunLauncherAsWorker, false) }

// Program returns the job as the MPI program both forms describe, in the spec.worker form, and
// the name of its workers' main container. The FFFFFaraway form's numWorkers, workerTemplate
// and launcherTemplate become worker.replicas, worker.template and launcher.template, and its
// main container is the worker template's first. The result shares nothing with s.
func (s *MPIJobSpec) Program() (p MPIProgramSpec, mainContainer string) {
	if s.IsKubeflowForm() {
		return s.kubeflowProgram()
	}
	p = *s.MPIProgramSpec.DeepCopy()
	if !s.IsWorkerTemplateForm() {
		return p, MPIWorkerContainer
	}
	p.Worker = MPIWorker{Template: *s.WorkerTemplate.DeepCopy()}
	if s.NumWorkers != nil {
		p.Worker.Replicas = ptr.To(*s.NumWorkers)
	}
	p.Launcher = &MPILauncher{}
	if s.LauncherTemplate != nil {
		p.Launcher.Template = s.LauncherTemplate.DeepCopy()
	}
	if cs := s.WorkerTemplate.Spec.Containers; len(cs) > 0 {
		mainContainer = cs[0].Name
	}
	return p, mainContainer
}

// MPIProgramSpec is what MPIJob and HorovodJob share: a launcher running an MPI program on a
// set of worker pods.
// +kubebuilder:validation:XValidation:rule="(has(self.runMode) && has(self.runMode.debug)) ? (has(oldSelf.runMode) && has(oldSelf.runMode.debug) && self.runMode.debug == oldSelf.runMode.debug) : !(has(oldSelf.runMode) && has(oldSelf.runMode.debug))",message="runMode.debug: cannot change once the job exists"
// +kubebuilder:validation:XValidation:rule="(has(self.runMode) && has(self.runMode.pause) && has(self.runMode.pause.resumeSpecs)) ? (has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.resumeSpecs) && self.runMode.pause.resumeSpecs == oldSelf.runMode.pause.resumeSpecs) : !(has(oldSelf.runMode) && has(oldSelf.runMode.pause) && has(oldSelf.runMode.pause.resumeSpecs))",message="runMode.pause.resumeSpecs: cannot change once the job exists; set them when you create the job"
// +kubebuilder:validation:XValidation:rule="!has(self.scheduler) || !has(self.scheduler.t9kScheduler) || !has(self.scheduler.t9kScheduler.queue) || !has(self.schedulingPolicy) || !has(self.schedulingPolicy.queue) || self.schedulingPolicy.queue == self.scheduler.t9kScheduler.queue",message="scheduler.t9kScheduler.queue: contradicts schedulingPolicy.queue; give the queue once"
// +kubebuilder:validation:XValidation:rule="!has(self.ssh) || !has(self.ssh.secretName) || !has(self.transport) || self.transport == 'SSH'",message="the KubeExec transport uses no SSH keys; set transport SSH or remove ssh.secretName",fieldPath=".ssh.secretName"
// +kubebuilder:validation:XValidation:rule="!has(self.mca) || size(self.mca) == 0 || !has(self.mpiImplementation) || self.mpiImplementation in ['OpenMPI', 'OpenMPI5']",fieldPath=".mca",reason=FieldValueForbidden,messageExpression="\"MCA parameters are Open MPI's; %s does not read them\".format([self.mpiImplementation])"
// +kubebuilder:validation:XValidation:rule="!has(self.worker) || (has(self.worker.cmd) && size(self.worker.cmd) > 0) || (has(self.launcher) && has(self.launcher.template))",fieldPath=".worker.cmd",reason=FieldValueRequired,message="nothing to run: give the program in worker.cmd (the operator builds the launcher) or a launcher.template"
// +kubebuilder:validation:XValidation:rule="(has(self.worker) && has(self.worker.cmd)) == (has(oldSelf.worker) && has(oldSelf.worker.cmd)) && (!has(self.worker) || !has(self.worker.cmd) || self.worker.cmd == oldSelf.worker.cmd)",fieldPath=".worker.cmd",reason=FieldValueForbidden,message="cannot change once the job exists"
// +kubebuilder:validation:XValidation:rule="(has(self.worker) && has(self.worker.extraMPIArgs)) == (has(oldSelf.worker) && has(oldSelf.worker.extraMPIArgs)) && (!has(self.worker) || !has(self.worker.extraMPIArgs) || self.worker.extraMPIArgs == oldSelf.worker.extraMPIArgs)",fieldPath=".worker.extraMPIArgs",reason=FieldValueForbidden,message="cannot change once the job exists"
// +kubebuilder:validation:XValidation:rule="has(self.mca) == has(oldSelf.mca) && (!has(self.mca) || self.mca == oldSelf.mca)",fieldPath=".mca",reason=FieldValueForbidden,message="cannot change once the job exists"
// +kubebuilder:validation:XValidation:rule="has(self.mpiHome) == has(oldSelf.mpiHome) && (!has(self.mpiHome) || self.mpiHome == oldSelf.mpiHome)",fieldPath=".mpiHome",messageExpression="has(oldSelf.mpiHome) ? 'cannot change once the job exists (was \\\"%s\\\")'.format([oldSelf.mpiHome]) : 'cannot change once the job exists (was unset)'"
// +kubebuilder:validation:XValidation:rule="(has(self.launcher) && has(self.launcher.template)) == (has(oldSelf.launcher) && has(oldSelf.launcher.template))",fieldPath=".launcher.template",reason=FieldValueForbidden,message="cannot be added or removed once the job exists"
// +kubebuilder:validation:XValidation:rule="(has(self.runPolicy) && has(self.runPolicy.failurePolicy)) ? (has(oldSelf.runPolicy) && has(oldSelf.runPolicy.failurePolicy) && self.runPolicy.failurePolicy == oldSelf.runPolicy.failurePolicy) : !(has(oldSelf.runPolicy) && has(oldSelf.runPolicy.failurePolicy))",message="runPolicy.failurePolicy: cannot change once the job exists"
// +kubebuilder:validation:XValidation:rule="(has(self.runPolicy) && has(self.runPolicy.storage)) ? (has(oldSelf.runPolicy) && has(oldSelf.runPolicy.storage) && self.runPolicy.storage == oldSelf.runPolicy.storage) : !(has(oldSelf.runPolicy) && has(oldSelf.runPolicy.storage))",message="runPolicy.storage: cannot change once the job exists"
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",fieldPath=".managedBy",message="cannot change once the job exists"
type MPIProgramSpec struct {
	// worker is the worker pods. Required, but for an MPIJob written in the FFFFFaraway form
	// (spec.workerTemplate).
	// +optional
	Worker MPIWorker `json:"worker,omitzero"`

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
	// (its pods deleted, the job kept). Replica types: launcher and worker.
	// +kubebuilder:validation:XValidation:rule="!has(self.debug) || !has(self.debug.replicaSpecs) || self.debug.replicaSpecs.all(r, r.type == 'launcher' || r.type == 'worker')",message="debug.replicaSpecs: type must be launcher or worker"
	// +kubebuilder:validation:XValidation:rule="!has(self.pause) || !has(self.pause.resumeSpecs) || self.pause.resumeSpecs.all(r, r.type == 'launcher' || r.type == 'worker')",message="pause.resumeSpecs: type must be launcher or worker"
	// +optional
	RunMode *RunMode `json:"runMode,omitempty"`

	// scheduler is the T9k MPIJob's scheduler section; t9kScheduler's queue and priority
	// become schedulingPolicy.queue and schedulingPolicy.priorityClassName.
	// +optional
	Scheduler *SchedulerSpec `json:"scheduler,omitempty"`
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
// (a StatefulSet) it starts the processes on. The name is a DNS-1035 label (it names the
// headless Service) of at most 45 characters, so that the StatefulSet <name>-worker fits in 52
// (its pods' controller-revision-hash label); the launcher Job <name>-launcher and the pods'
// host names <name>-worker-<ordinal> then fit in 63 for any replica count.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name: must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter and ending with a letter or digit (the job's name is also its headless Service's)",fieldPath=".metadata"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 45",fieldPath=".metadata",messageExpression="'metadata.name: must be no more than 45 characters: the StatefulSet \"%s-worker\" would have %d characters, more than 52'.format([self.metadata.name, self.metadata.name.size() + 7])"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.worker.replicas,statuspath=.status.workerReplicas,selectorpath=.status.workerSelector
// +kubebuilder:resource:shortName=mpij,categories=troupe
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.workers`,description="Ready worker pods / desired"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,description="What holds the job or ended it"
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress.percent`,description="Percent of the training done, as it reports it"
// +kubebuilder:printcolumn:name="ETA",type=string,JSONPath=`.status.progress.remaining`,description="Time left at the reported rate, as of the last report"
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

func init() { registerKind(&MPIJob{}, &MPIJobList{}) }
