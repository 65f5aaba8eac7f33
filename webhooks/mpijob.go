package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// +kubebuilder:webhook:path=/mutate-troupe-dev-v1alpha1-mpijob,mutating=true,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=mpijobs,verbs=create;update,versions=v1alpha1,name=mmpijob.troupe.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-troupe-dev-v1alpha1-mpijob,mutating=false,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=mpijobs,verbs=create;update,versions=v1alpha1,name=vmpijob.troupe.dev,admissionReviewVersions=v1

// MPIJob defaults and validates MPIJobs.
type MPIJob struct{ Options }

var (
	_ admission.Defaulter[*troupev1.MPIJob] = MPIJob{}
	_ admission.Validator[*troupev1.MPIJob] = MPIJob{}
)

// Default fills what the user left out with what the operator would assume.
func (w MPIJob) Default(ctx context.Context, job *troupev1.MPIJob) error {
	DefaultMPIJob(job, w.Options)
	suspendIfQueued(ctx, job)
	return nil
}

// DefaultMPIJob fills an MPIJob's defaults: troupev1's SetDefaults, which the adapter applies
// too; it is idempotent.
func DefaultMPIJob(job *troupev1.MPIJob, o Options) {
	job.SetDefaults(o.Defaults())
}

// ValidateMPIJob returns every problem of an MPIJob's spec, at the paths of the form it is
// written in.
func ValidateMPIJob(job *troupev1.MPIJob) field.ErrorList {
	p, main := job.Spec.Program()
	errs := validateMPIProgram(job.Name, &p, main, mpiJobPaths(&job.Spec))
	if job.Spec.IsWorkerTemplateForm() {
		errs = append(errs, validateWorkerTemplateForm(&job.Spec)...)
	} else if job.Spec.NumWorkers != nil || job.Spec.LauncherTemplate != nil {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "worker"), twoFormsMessage))
	}
	return errs
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
	if s.IsWorkerTemplateForm() {
		return workerTemplateFormPaths()
	}
	return workerFormPaths()
}

// ValidateCreate refuses an MPIJob that could not run as written.
func (MPIJob) ValidateCreate(ctx context.Context, job *troupev1.MPIJob) (admission.Warnings, error) {
	warnings := append(t9kSchedulerWarnings(&job.Spec.MPIProgramSpec), gitHostKeyWarnings(field.NewPath("spec", "appCodesToSync"), job.Spec.AppCodesToSync)...)
	return warnings, invalid("MPIJob", job.Name, append(validateSize(ctx), ValidateMPIJob(job)...))
}

// ValidateUpdate refuses changes to what is fixed once the job exists, and an invalid spec.
func (w MPIJob) ValidateUpdate(ctx context.Context, old, job *troupev1.MPIJob) (admission.Warnings, error) {
	// A job stored while the webhook was down lacks its defaults, which this update was given.
	old = old.DeepCopy()
	DefaultMPIJob(old, w.Options)
	errs := validateSize(ctx)
	if !equality.Semantic.DeepEqual(old.Spec, job.Spec) {
		errs = append(errs, ValidateMPIJob(job)...)
	}
	if old.Spec.IsWorkerTemplateForm() != job.Spec.IsWorkerTemplateForm() {
		return nil, invalid("MPIJob", job.Name, append(errs, field.Forbidden(field.NewPath("spec"),
			"the job cannot change between the spec.worker form and the spec.workerTemplate form once it exists")))
	}
	oldProgram, _ := old.Spec.Program()
	newProgram, _ := job.Spec.Program()
	errs = append(errs, validateMPIProgramUpdate(&oldProgram, &newProgram, mpiJobPaths(&job.Spec))...)
	errs = append(errs, validateQueueUpdate(old, job)...)
	return nil, invalid("MPIJob", job.Name, errs)
}

// ValidateDelete allows every deletion.
func (MPIJob) ValidateDelete(context.Context, *troupev1.MPIJob) (admission.Warnings, error) {
	return nil, nil
}
