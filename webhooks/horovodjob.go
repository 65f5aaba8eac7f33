package webhooks

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// +kubebuilder:webhook:path=/mutate-troupe-dev-v1alpha1-horovodjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=horovodjobs,verbs=create;update,versions=v1alpha1,name=mhorovodjob.troupe.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-troupe-dev-v1alpha1-horovodjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=troupe.dev,resources=horovodjobs,verbs=create;update,versions=v1alpha1,name=vhorovodjob.troupe.dev,admissionReviewVersions=v1

// HorovodJob defaults and validates HorovodJobs.
type HorovodJob = Webhook[*troupev1.HorovodJob, horovodJobRules]

// horovodJobRules are HorovodJob's own admission rules.
type horovodJobRules struct{}

// Validate is ValidateHorovodJob, which the adapter runs too.
func (horovodJobRules) Validate(job *troupev1.HorovodJob) field.ErrorList {
	return ValidateHorovodJob(job)
}

// Warnings tell what troupe changes or ignores of what the user wrote.
func (horovodJobRules) Warnings(job *troupev1.HorovodJob) admission.Warnings {
	return append(t9kSchedulerWarnings(&job.Spec.MPIProgramSpec), gitHostKeyWarnings(field.NewPath("spec", "appCodesToSync"), job.Spec.AppCodesToSync)...)
}

// ValidateUpdate refuses changes to what is fixed once the job exists: the MPI program's
// (validateMPIProgramUpdate) and the elastic bounds.
func (horovodJobRules) ValidateUpdate(old, job *troupev1.HorovodJob) field.ErrorList {
	errs := validateMPIProgramUpdate(&old.Spec.MPIProgramSpec, &job.Spec.MPIProgramSpec, workerFormPaths())
	return append(errs, unchanged(field.NewPath("spec", "elastic"), old.Spec.Elastic, job.Spec.Elastic)...)
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
