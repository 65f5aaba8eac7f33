package webhooks

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Job is a job of any kind as its webhook sees it: an API object Kueue can queue, with every
// default of the kind in its SetDefaults (apis/troupe/v1alpha1).
type Job interface {
	metav1.Object
	runtime.Object
	troupev1.QueuedJob
	SetDefaults(troupev1.OperatorDefaults)
}

// Rules are what a kind's webhook file says of its jobs; Webhook does the rest, alike for every
// kind. A kind's rules are a type without fields (chainerJobRules), so that its webhook type is
// an alias of Webhook and is written ChainerJob{Options: o}.
type Rules[T Job] interface {
	// Validate returns every problem of a defaulted job's spec. It is the kind's one
	// validation function: the adapter runs it too, on a job stored while the webhook was down.
	Validate(job T) field.ErrorList
	// ValidateUpdate returns the changes an update may not make, of what is fixed once the
	// job exists (both jobs defaulted); the rules every kind shares are Webhook's.
	ValidateUpdate(old, job T) field.ErrorList
	// Warnings tell what troupe changes or ignores of what the user wrote in a new job.
	Warnings(job T) admission.Warnings
}

// defaultsFromRequest is what a kind's Rules may add to defaulting: a change the request itself
// implies, made before SetDefaults (MPIJob's kubeflow.org/v1 cleanPodPolicy).
type defaultsFromRequest[T Job] interface {
	BeforeDefaults(ctx context.Context, job T)
}

// Webhook defaults and validates the jobs of one kind, whose own rules are R: it is every
// kind's admission but for those rules.
type Webhook[T Job, R Rules[T]] struct{ Options }

// Default fills what the user left out with what the operator would assume (the kind's
// SetDefaults, which the adapter applies too), and creates a job queued in Kueue suspended.
func (w Webhook[T, R]) Default(ctx context.Context, job T) error {
	var rules R
	if d, ok := any(rules).(defaultsFromRequest[T]); ok {
		d.BeforeDefaults(ctx, job)
	}
	job.SetDefaults(w.Defaults())
	multiKueueToSpec(ctx, job)
	suspendIfQueued(ctx, job)
	return nil
}

// ValidateCreate refuses a job that could not run as written.
func (w Webhook[T, R]) ValidateCreate(ctx context.Context, job T) (admission.Warnings, error) {
	var rules R
	warnings := append(rules.Warnings(job), managedByWarnings(job)...)
	errs := append(validateSize(ctx), rules.Validate(job)...)
	errs = append(errs, validateManagedBy(job)...)
	errs = append(errs, w.ValidateClaimVolumeSources(job.JobRunPolicy())...)
	return warnings, invalid(kindOf[T](), job.GetName(), errs)
}

// ValidateUpdate refuses changes to what is fixed once the job exists, and an invalid spec.
// The spec is validated again only when it changed: a job admitted under older rules can
// still be relabelled, suspended by Kueue or have its status written.
func (w Webhook[T, R]) ValidateUpdate(ctx context.Context, old, job T) (admission.Warnings, error) {
	var rules R
	// A job stored while the webhook was down lacks its defaults, which this update was given.
	old = old.DeepCopyObject().(T)
	old.SetDefaults(w.Defaults())
	errs := validateSize(ctx)
	if !equality.Semantic.DeepEqual(specOf(old), specOf(job)) {
		errs = append(errs, rules.Validate(job)...)
		errs = append(errs, validateManagedBy(job)...)
	}
	errs = append(errs, rules.ValidateUpdate(old, job)...)
	errs = append(errs, validateQueueUpdate(old, job)...)
	return nil, invalid(kindOf[T](), job.GetName(), errs)
}

// ValidateDelete allows every deletion.
func (Webhook[T, R]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}

// kindOf is the API kind of T, a pointer to a kind's type: the type's name, as the scheme
// registers it (troupev1.AddToScheme).
func kindOf[T Job]() string { return reflect.TypeFor[T]().Elem().Name() }

// specOf is a job's spec: the field Spec of every kind's type.
func specOf(job runtime.Object) any {
	return reflect.ValueOf(job).Elem().FieldByName("Spec").Interface()
}
