package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"path"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// +kubebuilder:webhook:path=/mutate-troupe-dev-v1alpha1-mpijob,mutating=true,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=mpijobs,verbs=create;update,versions=v1alpha1,name=mmpijob.troupe.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-troupe-dev-v1alpha1-mpijob,mutating=false,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=mpijobs,verbs=create;update,versions=v1alpha1,name=vmpijob.troupe.dev,admissionReviewVersions=v1

// MPIJob defaults and validates MPIJobs.
type MPIJob = Webhook[*troupev1.MPIJob, mpiJobRules]

// mpiJobRules are MPIJob's own admission rules.
type mpiJobRules struct{}

// Validate is ValidateMPIJob, which the adapter runs too.
func (mpiJobRules) Validate(job *troupev1.MPIJob) field.ErrorList { return ValidateMPIJob(job) }

// Warnings tell what troupe changes or ignores of what the user wrote.
func (mpiJobRules) Warnings(job *troupev1.MPIJob) admission.Warnings {
	warnings := append(t9kSchedulerWarnings(&job.Spec.MPIProgramSpec), gitHostKeyWarnings(field.NewPath("spec", "appCodesToSync"), job.Spec.AppCodesToSync)...)
	return append(warnings, kubeflowWarnings(&job.Spec)...)
}

// BeforeDefaults follows a change of kubeflow.org/v1's spec.cleanPodPolicy
// (followV1CleanPodPolicy).
func (mpiJobRules) BeforeDefaults(ctx context.Context, job *troupev1.MPIJob) {
	followV1CleanPodPolicy(ctx, job)
}

// followV1CleanPodPolicy carries a change of kubeflow.org/v1's spec.cleanPodPolicy to
// spec.runPolicy.cleanPodPolicy when the update leaves the latter as stored (filled from the
// former, or kubeflow's None, by defaulting): re-applying a manifest with that one field changed
// is not refused as a contradiction of a value the user never wrote.
func followV1CleanPodPolicy(ctx context.Context, job *troupev1.MPIJob) {
	if job.Spec.CleanPodPolicy == nil || job.Spec.RunPolicy.CleanPodPolicy == nil {
		return
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.Operation != admissionv1.Update {
		return
	}
	var old troupev1.MPIJob
	if json.Unmarshal(req.OldObject.Raw, &old) != nil {
		return
	}
	if !ptr.Equal(old.Spec.CleanPodPolicy, job.Spec.CleanPodPolicy) && ptr.Equal(old.Spec.RunPolicy.CleanPodPolicy, job.Spec.RunPolicy.CleanPodPolicy) {
		job.Spec.RunPolicy.CleanPodPolicy = ptr.To(*job.Spec.CleanPodPolicy)
	}
}

// ValidateMPIJob returns every problem of an MPIJob's spec, at the paths of the form it is
// written in.
func ValidateMPIJob(job *troupev1.MPIJob) field.ErrorList {
	p, main := job.Spec.Program()
	errs := validateMPIProgram(job.Name, &p, main, mpiJobPaths(&job.Spec))
	switch {
	case job.Spec.IsKubeflowForm():
		errs = append(errs, validateKubeflowForm(&job.Spec)...)
	case job.Spec.IsWorkerTemplateForm():
		errs = append(errs, validateWorkerTemplateForm(&job.Spec)...)
	case job.Spec.NumWorkers != nil || job.Spec.LauncherTemplate != nil:
		errs = append(errs, field.Forbidden(field.NewPath("spec", "worker"), twoFormsMessage))
	}
	if !job.Spec.IsKubeflowForm() {
		spec := field.NewPath("spec")
		if job.Spec.SlotsPerWorker != nil {
			errs = append(errs, field.Forbidden(spec.Child("slotsPerWorker"), "belongs to kubeflow's form (spec.mpiReplicaSpecs); in the spec.worker form the slots are spec.worker.slots"))
		}
		if job.Spec.SSHAuthMountPath != "" {
			errs = append(errs, field.Forbidden(spec.Child("sshAuthMountPath"), "belongs to kubeflow's form (spec.mpiReplicaSpecs), whose pods get one key pair there; the other forms use troupe's SSH transport (spec.ssh)"))
		}
		if job.Spec.CleanPodPolicy != nil {
			errs = append(errs, field.Forbidden(spec.Child("cleanPodPolicy"), "is kubeflow.org/v1's place of spec.runPolicy.cleanPodPolicy, kept for kubeflow's form (spec.mpiReplicaSpecs): write spec.runPolicy.cleanPodPolicy"))
		}
		if job.Spec.MainContainer != "" {
			errs = append(errs, field.Forbidden(spec.Child("mainContainer"), "belongs to kubeflow's form (spec.mpiReplicaSpecs); in the other forms the main container is the worker template's first (spec.workerTemplate) or the one named "+troupev1.MPIWorkerContainer))
		}
	}
	// In every form: kubeflow's spelling of the scheduling policy must not say otherwise.
	return append(errs, validateSchedulingPolicyClash(field.NewPath("spec"), job.Spec.RunPolicy.SchedulingPolicy, &job.Spec.SchedulingPolicy)...)
}

const twoFormsMessage = "spec.worker and spec.numWorkers/launcherTemplate/workerTemplate are two forms of the same job: write one of them"

// validateWorkerTemplateForm checks what only the FFFFFaraway form can get wrong: fields of the
// other form, and a transport that would need sshd in workers that run their own command.
func validateWorkerTemplateForm(s *troupev1.MPIJobSpec) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(s.Worker, troupev1.MPIWorker{}) {
		errs = append(errs, field.Forbidden(spec.Child("worker"), twoFormsMessage))
	}
	if s.Launcher != nil {
		errs = append(errs, field.Forbidden(spec.Child("launcher"),
			"belongs to the spec.worker form: with spec.workerTemplate the launcher is spec.launcherTemplate"))
	}
	if s.LauncherTemplate == nil {
		errs = append(errs, field.Required(spec.Child("launcherTemplate"),
			"its command runs the program (for example horovodrun --hostfile $OMPI_MCA_orte_default_hostfile ...)"))
	}
	if s.Transport != "" && s.Transport != troupev1.MPITransportKubeExec {
		errs = append(errs, field.NotSupported(spec.Child("transport"), s.Transport, []troupev1.MPITransport{troupev1.MPITransportKubeExec}))
	}
	return errs
}

// mpiJobPaths are the paths of the form the job is written in.
func mpiJobPaths(s *troupev1.MPIJobSpec) programPaths {
	switch {
	case s.IsKubeflowForm():
		return kubeflowFormPaths()
	case s.IsWorkerTemplateForm():
		return workerTemplateFormPaths()
	}
	return workerFormPaths()
}

const kubeflowFormsMessage = "spec.mpiReplicaSpecs (kubeflow's form) and spec.worker/launcher or spec.numWorkers/launcherTemplate/workerTemplate are forms of the same job: write one of them"

// validateKubeflowForm checks what only kubeflow's form can get wrong: fields of the other
// forms, the launcher's count, a worker restartPolicy a StatefulSet cannot keep, a transport
// other than kubeflow's SSH or KubeExec.
func validateKubeflowForm(s *troupev1.MPIJobSpec) field.ErrorList {
	spec := field.NewPath("spec")
	specs := spec.Child("mpiReplicaSpecs")
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(s.Worker, troupev1.MPIWorker{}) || s.Launcher != nil || s.NumWorkers != nil ||
		s.LauncherTemplate != nil || s.WorkerTemplate != nil {
		errs = append(errs, field.Forbidden(specs, kubeflowFormsMessage))
	}
	r := s.MPIReplicaSpecs
	switch {
	case r.Launcher == nil:
		errs = append(errs, field.Required(specs.Child("Launcher"), "the launcher runs the program (its command: mpirun ...)"))
	case r.Launcher.Replicas != nil && *r.Launcher.Replicas != 1:
		errs = append(errs, field.Invalid(specs.Child("Launcher", "replicas"), *r.Launcher.Replicas, "the launcher is one pod: replicas must be 1"))
	case r.Launcher.RestartPolicy == troupev1.ReplicaRestartAlways:
		errs = append(errs, field.NotSupported(specs.Child("Launcher", "restartPolicy"), r.Launcher.RestartPolicy,
			[]troupev1.ReplicaRestartPolicy{troupev1.ReplicaRestartOnFailure, troupev1.ReplicaRestartNever, troupev1.ReplicaRestartExitCode}))
	}
	if w := r.Worker; w != nil && w.RestartPolicy == troupev1.ReplicaRestartExitCode {
		errs = append(errs, field.NotSupported(specs.Child("Worker", "restartPolicy"), w.RestartPolicy,
			[]troupev1.ReplicaRestartPolicy{troupev1.ReplicaRestartNever, troupev1.ReplicaRestartOnFailure, troupev1.ReplicaRestartAlways}))
	}
	if s.Transport != "" && s.Transport != troupev1.MPITransportKubeExec {
		errs = append(errs, field.NotSupported(spec.Child("transport"), s.Transport, []troupev1.MPITransport{troupev1.MPITransportKubeExec}))
	}
	if s.SSH != nil {
		errs = append(errs, field.Forbidden(spec.Child("ssh"), "configures troupe's SSH transport, which kubeflow's form does not use: its key pair is mounted at sshAuthMountPath"))
	}
	if s.SSHAuthMountPath != "" && !path.IsAbs(s.SSHAuthMountPath) {
		errs = append(errs, field.Invalid(spec.Child("sshAuthMountPath"), s.SSHAuthMountPath, "must be an absolute path"))
	}
	if s.CleanPodPolicy != nil && s.RunPolicy.CleanPodPolicy != nil && *s.CleanPodPolicy != *s.RunPolicy.CleanPodPolicy {
		errs = append(errs, field.Invalid(spec.Child("cleanPodPolicy"), *s.CleanPodPolicy,
			fmt.Sprintf("contradicts spec.runPolicy.cleanPodPolicy (%s); give it once", *s.RunPolicy.CleanPodPolicy)))
	}
	return errs
}

// validateSchedulingPolicyClash refuses a runPolicy.schedulingPolicy that says otherwise than
// spec.schedulingPolicy: the job would not run as one of them says.
func validateSchedulingPolicyClash(spec *field.Path, k *troupev1.KubeflowSchedulingPolicy, sp *troupev1.SchedulingPolicy) field.ErrorList {
	var errs field.ErrorList
	for _, c := range k.Contradictions(sp) {
		errs = append(errs, field.Invalid(spec.Child("runPolicy", "schedulingPolicy", c.Field), c.Given,
			fmt.Sprintf("contradicts spec.schedulingPolicy.%s (%v); give it once", c.SpecField, c.Spec)))
	}
	return errs
}

// kubeflowWarnings tell what kubeflow's form changes of what the user wrote: a pod template's
// restartPolicy gives way to its replica's, as in kubeflow's operator.
func kubeflowWarnings(s *troupev1.MPIJobSpec) admission.Warnings {
	r := s.MPIReplicaSpecs
	if r == nil {
		return nil
	}
	specs := field.NewPath("spec", "mpiReplicaSpecs")
	var out admission.Warnings
	if r.Launcher != nil {
		out = append(out, replicaRestartWarnings(specs.Child("Launcher"), r.Launcher, r.Launcher.RestartPolicy.PodRestartPolicy(corev1.RestartPolicyOnFailure))...)
	}
	return append(out, replicaRestartWarnings(specs.Child("Worker"), r.Worker, corev1.RestartPolicyAlways)...)
}

// replicaRestartWarnings says, of a replica of kubeflow's forms (at path) whose pods restart
// runsAs, that its template's own restartPolicy gives way to that, when it says otherwise.
func replicaRestartWarnings(path *field.Path, rs *troupev1.ReplicaSpec, runsAs corev1.RestartPolicy) admission.Warnings {
	if rs == nil || rs.Template.Spec.RestartPolicy == "" || rs.Template.Spec.RestartPolicy == runsAs {
		return nil
	}
	return admission.Warnings{fmt.Sprintf("%s: %s gives way to the replica's restartPolicy %s; its pods restart %s",
		path.Child("template", "spec", "restartPolicy"), rs.Template.Spec.RestartPolicy, rs.RestartPolicy, runsAs)}
}

// ValidateUpdate refuses changes to what is fixed once the job exists: the form it is written
// in, whether the launcher is a worker, and the MPI program's (validateMPIProgramUpdate).
func (mpiJobRules) ValidateUpdate(old, job *troupev1.MPIJob) field.ErrorList {
	if old.Spec.IsWorkerTemplateForm() != job.Spec.IsWorkerTemplateForm() {
		return field.ErrorList{field.Forbidden(field.NewPath("spec"),
			"the job cannot change between the spec.worker form and the spec.workerTemplate form once it exists")}
	}
	if old.Spec.IsKubeflowForm() != job.Spec.IsKubeflowForm() {
		return field.ErrorList{field.Forbidden(field.NewPath("spec"),
			"the job cannot change to or from kubeflow's form (spec.mpiReplicaSpecs) once it exists")}
	}
	errs := immutable(field.NewPath("spec", "runLauncherAsWorker"), old.Spec.LauncherIsWorker(), job.Spec.LauncherIsWorker())
	oldProgram, _ := old.Spec.Program()
	newProgram, _ := job.Spec.Program()
	return append(errs, validateMPIProgramUpdate(&oldProgram, &newProgram, mpiJobPaths(&job.Spec))...)
}
