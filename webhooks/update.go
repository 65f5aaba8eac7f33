package webhooks

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// schedulingFieldsNote names what may change in a template while its job is suspended.
const schedulingFieldsNote = "labels, annotations, nodeSelector, tolerations, affinity and schedulingGates"

// validateTemplateUpdate refuses a changed pod template: running pods would no longer match
// their job. While the job is suspended (no pods run), the fields that only decide where pods
// go may change, as Kueue and JobSet allow, so a queueing system can place a job before it
// starts. suspended is the stored job's state (wasSuspended): the update that sets the
// nodeSelector may also clear suspend, as Kueue admits a workload in one write, and as the
// API server allows for a batch Job.
func validateTemplateUpdate(p *field.Path, old, updated *corev1.PodTemplateSpec, suspended bool) field.ErrorList {
	if equality.Semantic.DeepEqual(old, updated) {
		return nil
	}
	if suspended && equality.Semantic.DeepEqual(withoutSchedulingFields(old), withoutSchedulingFields(updated)) {
		return nil
	}
	msg := "cannot change once the job exists; while the job is suspended its " + schedulingFieldsNote + " may"
	if suspended {
		msg = "only the " + schedulingFieldsNote + " of a suspended job's templates may change"
	}
	return field.ErrorList{field.Forbidden(p, msg)}
}

// wasSuspended says whether the stored job is suspended, which opens its templates' scheduling
// fields to change in this update, whatever the update does to suspend itself.
func wasSuspended(old troupev1.RunPolicy) bool { return ptr.Deref(old.Suspend, false) }

func withoutSchedulingFields(t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	c := t.DeepCopy()
	c.Labels, c.Annotations = nil, nil
	c.Spec.NodeSelector, c.Spec.Tolerations, c.Spec.Affinity, c.Spec.SchedulingGates = nil, nil, nil, nil
	return c
}

// immutable refuses a change of a field that is fixed once the job exists.
func immutable[T comparable](p *field.Path, old, updated T) field.ErrorList {
	if old == updated {
		return nil
	}
	return field.ErrorList{field.Invalid(p, updated, "cannot change once the job exists (was "+fmtValue(old)+")")}
}

// unchanged refuses a change of a structured field that is fixed once the job exists.
func unchanged(p *field.Path, old, updated any) field.ErrorList {
	if equality.Semantic.DeepEqual(old, updated) {
		return nil
	}
	return field.ErrorList{field.Forbidden(p, "cannot change once the job exists")}
}

func fmtValue(v any) string { return fmt.Sprintf("%q", fmt.Sprint(v)) }
