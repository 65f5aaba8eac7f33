package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// What every adapter's Describe begins with: the job as its kind's type, defaulted and
// validated (admitted), then the Spec's fields every kind fills alike (describePolicies).

// defaultable is a job kind with its SetDefaults (apis/troupe/v1alpha1).
type defaultable[T any] interface {
	*T
	DeepCopy() *T
	SetDefaults(troupev1.OperatorDefaults)
}

// admitted is the job an adapter describes: obj, of the kind's type, defaulted (defaulted), and
// refused with every problem the kind's validation function finds. validate is the one the
// kind's webhook runs (webhooks.ValidatePyTorchJob): a job stored while the webhook was down
// (or was told to ignore its failures) is refused as the webhook would have refused it, and
// reported InvalidSpec with each field named, so the adapter restates none of its rules.
func admitted[T any, P defaultable[T]](obj engine.Object, o Options, validate func(P) field.ErrorList) (P, error) {
	stored, ok := obj.(P)
	if !ok {
		return nil, fmt.Errorf("expected a %T, got %T", P(nil), obj)
	}
	job := defaulted(stored, o)
	if errs := validate(job); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return job, nil
}

// defaulted is a copy of a stored job with every default filled, by the same SetDefaults the
// defaulting webhook calls: a job stored without its defaults (written while the webhook was
// down) is built exactly as the defaulted job is. Adapters read only the copy and hold no
// default of their own, so theirs cannot drift from the webhook's.
func defaulted[T any, P defaultable[T]](job P, o Options) P {
	out := P(job.DeepCopy())
	out.SetDefaults(troupev1.OperatorDefaults{Gang: o.DefaultGang})
	return out
}

// describePolicies fills what every kind's Spec takes alike from a defaulted job: its run
// policy, its scheduling policy (kubeflow's runPolicy.schedulingPolicy folded in by the kind)
// and the gang provider it names, and the container that runs the job's processes.
func describePolicies(s *engine.Spec, rp troupev1.RunPolicy, sp troupev1.SchedulingPolicy, mainContainer string, o Options) error {
	g, err := gangFor(sp, o)
	if err != nil {
		return err
	}
	s.Gang = g
	s.RunPolicy = rp
	s.SchedulingPolicy = sp
	s.MainContainer = mainContainer
	return nil
}
