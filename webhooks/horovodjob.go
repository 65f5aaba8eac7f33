package webhooks

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// +kubebuilder:webhook:path=/mutate-troupe-dev-v1alpha1-horovodjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=horovodjobs,verbs=create;update,versions=v1alpha1,name=mhorovodjob.troupe.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-troupe-dev-v1alpha1-horovodjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=horovodjobs,verbs=create;update,versions=v1alpha1,name=vhorovodjob.troupe.dev,admissionReviewVersions=v1

// HorovodJob defaults and validates HorovodJobs.
type HorovodJob struct{ Options }

var (
	_ admission.Defaulter[*troupev1.HorovodJob] = HorovodJob{}
	_ admission.Validator[*troupev1.HorovodJob] = HorovodJob{}
)

// Default fills what the user left out with what the operator would assume.
func (w HorovodJob) Default(ctx context.Context, job *troupev1.HorovodJob) error {
	DefaultHorovodJob(job, w.Options)
	suspendIfQueued(ctx, job)
	return nil
}

// DefaultHorovodJob fills a HorovodJob's defaults: troupev1's SetDefaults, which the adapter
// applies too; it is idempotent.
func DefaultHorovodJob(job *troupev1.HorovodJob, o Options) {
	job.SetDefaults(o.Defaults())
}

// ValidateHorovodJob returns every problem of a HorovodJob's spec.
func ValidateHorovodJob(job *troupev1.HorovodJob) field.ErrorList {
	errs := validateMPIProgram(job.Name, &job.Spec.MPIProgramSpec, troupev1.HorovodMainContainer, workerFormPaths())
	e := job.Spec.Elastic
	if e == nil {
		return errs
	}
	p := field.NewPath("spec", "elastic")
	replicas := ptr.Deref(job.Spec.Worker.Replicas, e.MinReplicas)
	switch {
	case e.MinReplicas < 1:
		errs = append(errs, field.Invalid(p.Child("minReplicas"), e.MinReplicas, "must be 1 or more"))
	case e.MaxReplicas > troupev1.MaxWorkerReplicas:
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), e.MaxReplicas, fmt.Sprintf("must be no more than %d", troupev1.MaxWorkerReplicas)))
	case e.MinReplicas > e.MaxReplicas:
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), e.MaxReplicas, "must not be less than minReplicas"))
	case replicas < e.MinReplicas || replicas > e.MaxReplicas:
		errs = append(errs, field.Invalid(field.NewPath("spec", "worker", "replicas"), replicas,
			"must lie within elastic.minReplicas and elastic.maxReplicas"))
	}
	if job.Spec.Transport == troupev1.MPITransportKubeExec {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "transport"),
			"elastic Horovod starts its workers with ssh itself: use transport SSH"))
	}
	return append(errs, validateElasticFailurePolicy(field.NewPath("spec", "runPolicy", "failurePolicy"), job.Spec.RunPolicy.FailurePolicy, "elastic Horovod")...)
}

// ValidateCreate refuses a HorovodJob that could not run as written.
func (w HorovodJob) ValidateCreate(ctx context.Context, job *troupev1.HorovodJob) (admission.Warnings, error) {
	warnings := append(t9kSchedulerWarnings(&job.Spec.MPIProgramSpec), gitHostKeyWarnings(field.NewPath("spec", "appCodesToSync"), job.Spec.AppCodesToSync)...)
	warnings = append(warnings, managedByWarnings(&job.Spec.RunPolicy)...)
	return warnings, invalid("HorovodJob", job.Name, append(append(validateSize(ctx), ValidateHorovodJob(job)...), w.ValidateClaimVolumeSources(&job.Spec.RunPolicy)...))
}

// ValidateUpdate refuses changes to what is fixed once the job exists, and an invalid spec.
func (w HorovodJob) ValidateUpdate(ctx context.Context, old, job *troupev1.HorovodJob) (admission.Warnings, error) {
	// A job stored while the webhook was down lacks its defaults, which this update was given.
	old = old.DeepCopy()
	DefaultHorovodJob(old, w.Options)
	errs := validateSize(ctx)
	if !equality.Semantic.DeepEqual(old.Spec, job.Spec) {
		errs = append(errs, ValidateHorovodJob(job)...)
	}
	errs = append(errs, validateMPIProgramUpdate(&old.Spec.MPIProgramSpec, &job.Spec.MPIProgramSpec, workerFormPaths())...)
	errs = append(errs, unchanged(field.NewPath("spec", "elastic"), old.Spec.Elastic, job.Spec.Elastic)...)
	errs = append(errs, validateQueueUpdate(old, job)...)
	return nil, invalid("HorovodJob", job.Name, errs)
}

// ValidateDelete allows every deletion.
func (HorovodJob) ValidateDelete(context.Context, *troupev1.HorovodJob) (admission.Warnings, error) {
	return nil, nil
}
