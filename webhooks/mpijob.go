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
func (w MPIJob) Default(_ context.Context, job *troupev1.MPIJob) error {
	DefaultMPIJob(job, w.Options)
	return nil
}

// DefaultMPIJob fills an MPIJob's defaults; it is idempotent.
func DefaultMPIJob(job *troupev1.MPIJob, o Options) {
	defaultMPIProgram(&job.Spec.MPIProgramSpec, troupev1.MPIWorkerContainer, o)
}

// ValidateMPIJob returns every problem of an MPIJob's spec.
func ValidateMPIJob(job *troupev1.MPIJob) field.ErrorList {
	return validateMPIProgram(job.Name, &job.Spec.MPIProgramSpec, troupev1.MPIWorkerContainer)
}

// ValidateCreate refuses an MPIJob that could not run as written.
func (MPIJob) ValidateCreate(_ context.Context, job *troupev1.MPIJob) (admission.Warnings, error) {
	return t9kSchedulerWarnings(&job.Spec.MPIProgramSpec), invalid("MPIJob", job.Name, ValidateMPIJob(job))
}

// ValidateUpdate refuses changes to what is fixed once the job exists, and an invalid spec.
func (MPIJob) ValidateUpdate(_ context.Context, old, job *troupev1.MPIJob) (admission.Warnings, error) {
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(old.Spec, job.Spec) {
		errs = ValidateMPIJob(job)
	}
	errs = append(errs, validateMPIProgramUpdate(&old.Spec.MPIProgramSpec, &job.Spec.MPIProgramSpec)...)
	return nil, invalid("MPIJob", job.Name, errs)
}

// ValidateDelete allows every deletion.
func (MPIJob) ValidateDelete(context.Context, *troupev1.MPIJob) (admission.Warnings, error) {
	return nil, nil
}
