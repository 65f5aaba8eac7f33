package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// Kueue's labels and annotation, read on the job itself (docs/kueue.md).
const (
	// LabelQueueName names the Kueue LocalQueue, in the job's namespace, the job waits in.
	LabelQueueName = "kueue.x-k8s.io/queue-name"
	// LabelWorkloadPriorityClass names the Kueue WorkloadPriorityClass of the job's Workload.
	LabelWorkloadPriorityClass = "kueue.x-k8s.io/priority-class"
	// AnnotationElasticJob "true" on an elastic job (PyTorch elasticPolicy, elastic Horovod)
	// lets it grow without a stop through Kueue's Workload slices, which Kueue's
	// ElasticJobsViaWorkloadSlices feature gate must allow; Kueue's own annotation for its kinds.
	AnnotationElasticJob = "kueue.x-k8s.io/elastic-job"
)

// AnnotationAdmittedPodSets records, on a queued job Kueue admitted, the pod counts of its
// admission ("<pod set>=<count>,...", by pod set name): written by the operator in the write
// that resumes the job, removed in the one that suspends it. While it is there, the operator
// creates no pod of a worker set beyond its admitted count: a job scaled past its admission
// waits, its Workload made again at the new size, for Kueue to admit it (docs/kueue.md).
const AnnotationAdmittedPodSets = "troupe.dev/admitted-pod-sets"

// ManagedByTroupeOperator is the runPolicy.managedBy value that means troupe, like unset.
const ManagedByTroupeOperator = "troupe.dev/troupe-operator"

// ManagedByKubeflowMPIOperator is kubeflow's own runPolicy.managedBy value, which kubeflow's
// manifests carry: where troupe serves MPIJob, it means troupe too.
const ManagedByKubeflowMPIOperator = "kubeflow.org/mpi-operator"

// ManagedByKubeflowTrainingOperator is kubeflow training-operator's runPolicy.managedBy value
// (its kubeflow.org/v1 PyTorchJobs and MPIJobs): where troupe serves the kind, it means troupe.
const ManagedByKubeflowTrainingOperator = "kubeflow.org/training-operator"

// ManagedByMultiKueue is Kueue's MultiKueue controller: a job of a manager cluster it dispatches
// to a worker cluster (spec.managedBy, docs/kueue.md).
const ManagedByMultiKueue = "kueue.x-k8s.io/multikueue"

// Kueue's labels on the copy of a job MultiKueue makes in a worker cluster.
const (
	// LabelPrebuiltWorkload names the Workload, made by MultiKueue beside the copy, that admits
	// it: the operator makes no Workload of its own for the job and runs it under that one.
	LabelPrebuiltWorkload = "kueue.x-k8s.io/prebuilt-workload-name"
	// LabelMultiKueueOrigin names the manager cluster the copy came from.
	LabelMultiKueueOrigin = "kueue.x-k8s.io/multikueue-origin"
)

// Reasons of ConditionAdmitted besides Kueue's own eviction reasons (Preempted, ...).
const (
	ReasonQueued   = "Pending"
	ReasonAdmitted = "Admitted"
	// ReasonAwaitingAdmission (WorkersReady): a worker set asks more pods than Kueue admitted;
	// the pods beyond the admission are not created.
	ReasonAwaitingAdmission = "AwaitingAdmission"
	// ReasonKueueNotInstalled: the job names a LocalQueue but the cluster serves no Kueue
	// Workload API; it is held suspended until Kueue is installed.
	ReasonKueueNotInstalled = "KueueNotInstalled"
)

// PodSet is one group of identical pods of a job, as a queueing system counts and places them:
// the master (launcher), then each worker set.
// +kubebuilder:object:generate=false
type PodSet struct {
	// Name is "master" for a ChainerJob's master, "launcher" for an MPIJob's or HorovodJob's,
	// and the worker set's name for each worker set.
	Name string
	// HasTemplate is false for a launcher the operator generates from the workers' template:
	// it has no template of its own to place, and goes where the workers go.
	HasTemplate bool
}

// PodSetMaster and PodSetLauncher name the master's pod set.
const (
	PodSetMaster   = "master"
	PodSetLauncher = "launcher"
)

// QueuedJob is what every kind offers a queueing system: its run policy (suspend, managedBy),
// its pod sets, and their templates in the spec, whose scheduling fields (nodeSelector,
// tolerations) a queueing system sets while the job is suspended.
// +kubebuilder:object:generate=false
type QueuedJob interface {
	JobRunPolicy() *RunPolicy
	// JobManagedBy is spec.managedBy, where Kueue's MultiKueue reads the job's controller.
	JobManagedBy() *string
	SetJobManagedBy(*string)
	PodSets() []PodSet
	// EditPodSetTemplate calls edit with the template of the named pod set, in the spec; it does
	// nothing for a pod set without a template of its own (or of another name).
	EditPodSetTemplate(name string, edit func(*corev1.PodTemplateSpec))
}

var (
	_ QueuedJob = &ChainerJob{}
	_ QueuedJob = &MPIJob{}
	_ QueuedJob = &HorovodJob{}
)

// Controller is the controller the job names: spec.managedBy, else runPolicy.managedBy; ""
// when it names none.
func Controller(j QueuedJob) string {
	if v := j.JobManagedBy(); v != nil {
		return *v
	}
	if v := j.JobRunPolicy().ManagedBy; v != nil {
		return *v
	}
	return ""
}

// ManagedElsewhere reports whether spec.managedBy or runPolicy.managedBy gives the job to
// another controller.
func ManagedElsewhere(j QueuedJob) bool {
	switch Controller(j) {
	case "", ManagedByTroupeOperator, ManagedByKubeflowMPIOperator, ManagedByKubeflowTrainingOperator:
		return false
	}
	return true
}

// DispatchedByMultiKueue reports whether the job is Kueue's MultiKueue's to dispatch to a
// worker cluster: in this (the manager) cluster it runs no pod.
func DispatchedByMultiKueue(j QueuedJob) bool { return Controller(j) == ManagedByMultiKueue }

// PrebuiltWorkload is the Workload a job names with LabelPrebuiltWorkload, if any: the copy
// MultiKueue made in a worker cluster runs under it.
func PrebuiltWorkload(labels map[string]string) (string, bool) {
	w, ok := labels[LabelPrebuiltWorkload]
	return w, ok && w != ""
}

// JobRunPolicy returns the job's run policy.
func (j *ChainerJob) JobRunPolicy() *RunPolicy { return &j.Spec.RunPolicy }

// JobManagedBy returns spec.managedBy.
func (j *ChainerJob) JobManagedBy() *string { return j.Spec.ManagedBy }

// SetJobManagedBy sets spec.managedBy.
func (j *ChainerJob) SetJobManagedBy(v *string) { j.Spec.ManagedBy = v }

// PodSets are the master and the worker sets in name order.
func (j *ChainerJob) PodSets() []PodSet {
	sets := []PodSet{{Name: PodSetMaster, HasTemplate: true}}
	for _, name := range j.Spec.WorkerSetNames() {
		sets = append(sets, PodSet{Name: name, HasTemplate: true})
	}
	return sets
}

// EditPodSetTemplate edits the master's template or a worker set's.
func (j *ChainerJob) EditPodSetTemplate(name string, edit func(*corev1.PodTemplateSpec)) {
	if name == PodSetMaster {
		edit(&j.Spec.Master.Template)
		return
	}
	if ws, ok := j.Spec.WorkerSets[name]; ok {
		edit(&ws.Template)
		j.Spec.WorkerSets[name] = ws
	}
}

// JobRunPolicy returns the job's run policy.
func (j *MPIJob) JobRunPolicy() *RunPolicy { return &j.Spec.RunPolicy }

// JobManagedBy returns spec.managedBy.
func (j *MPIJob) JobManagedBy() *string { return j.Spec.ManagedBy }

// SetJobManagedBy sets spec.managedBy.
func (j *MPIJob) SetJobManagedBy(v *string) { j.Spec.ManagedBy = v }

// PodSets are the launcher and the workers, in either form of the spec.
func (j *MPIJob) PodSets() []PodSet {
	if j.Spec.IsWorkerTemplateForm() {
		return []PodSet{{Name: PodSetLauncher, HasTemplate: j.Spec.LauncherTemplate != nil}, {Name: MPIWorkerSetName, HasTemplate: true}}
	}
	return j.Spec.podSets()
}

// EditPodSetTemplate edits the launcher's or the workers' template, in either form.
func (j *MPIJob) EditPodSetTemplate(name string, edit func(*corev1.PodTemplateSpec)) {
	if !j.Spec.IsWorkerTemplateForm() {
		j.Spec.editPodSetTemplate(name, edit)
		return
	}
	switch {
	case name == PodSetLauncher && j.Spec.LauncherTemplate != nil:
		edit(j.Spec.LauncherTemplate)
	case name == MPIWorkerSetName:
		edit(j.Spec.WorkerTemplate)
	}
}

// JobRunPolicy returns the job's run policy.
func (j *HorovodJob) JobRunPolicy() *RunPolicy { return &j.Spec.RunPolicy }

// JobManagedBy returns spec.managedBy.
func (j *HorovodJob) JobManagedBy() *string { return j.Spec.ManagedBy }

// SetJobManagedBy sets spec.managedBy.
func (j *HorovodJob) SetJobManagedBy(v *string) { j.Spec.ManagedBy = v }

// PodSets are the launcher and the workers.
func (j *HorovodJob) PodSets() []PodSet { return j.Spec.podSets() }

// EditPodSetTemplate edits the launcher's or the workers' template.
func (j *HorovodJob) EditPodSetTemplate(name string, edit func(*corev1.PodTemplateSpec)) {
	j.Spec.editPodSetTemplate(name, edit)
}

func (p *MPIProgramSpec) podSets() []PodSet {
	return []PodSet{{Name: PodSetLauncher, HasTemplate: p.Launcher != nil && p.Launcher.Template != nil}, {Name: MPIWorkerSetName, HasTemplate: true}}
}

func (p *MPIProgramSpec) editPodSetTemplate(name string, edit func(*corev1.PodTemplateSpec)) {
	switch {
	case name == PodSetLauncher && p.Launcher != nil && p.Launcher.Template != nil:
		edit(p.Launcher.Template)
	case name == MPIWorkerSetName:
		edit(&p.Worker.Template)
	}
}

// Queued reports the LocalQueue the job names with LabelQueueName, if any.
func Queued(labels map[string]string) (string, bool) {
	q, ok := labels[LabelQueueName]
	return q, ok && q != ""
}
