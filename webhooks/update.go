package webhooks

import (
	"encoding/json"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
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
//
// Each field that changed is named (spec.master.template.spec.containers[0].image), not the
// template: the user learns what to undo. The templates are compared as decoded, so that an
// empty field and an absent one (`resources: {}`, which older defaulting stored) are the same.
// This rule is the webhook's alone: a CRD rule can only compare whole templates as stored, and
// name the template (docs/admission.md, "Updates").
func validateTemplateUpdate(p *field.Path, old, updated *corev1.PodTemplateSpec, suspended bool) field.ErrorList {
	if equality.Semantic.DeepEqual(old, updated) {
		return nil
	}
	msg := "cannot change once the job exists; while the job is suspended its " + schedulingFieldsNote + " may"
	if suspended {
		msg = "only the " + schedulingFieldsNote + " of a suspended job's templates may change"
		old, updated = withoutSchedulingFields(old), withoutSchedulingFields(updated)
	}
	var errs field.ErrorList
	for _, changed := range changedFields(p, old, updated) {
		errs = append(errs, field.Forbidden(changed, msg))
	}
	return errs
}

// changedFields lists the paths, under p, of the fields that differ between two values as
// their JSON encodings: the deepest path of each change (a list that grew or shrank is named
// whole).
func changedFields(p *field.Path, old, updated any) []*field.Path {
	var a, b any
	if err := roundTrip(old, &a); err != nil {
		return []*field.Path{p}
	}
	if err := roundTrip(updated, &b); err != nil {
		return []*field.Path{p}
	}
	return diffJSON(p, a, b)
}

func roundTrip(v any, into *any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

func diffJSON(p *field.Path, a, b any) []*field.Path {
	if reflect.DeepEqual(a, b) {
		return nil
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := sets.KeySet(x).Union(sets.KeySet(y))
		var out []*field.Path
		for _, k := range sets.List(keys) {
			out = append(out, diffJSON(p.Child(k), x[k], y[k])...)
		}
		return out
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			break
		}
		var out []*field.Path
		for i := range x {
			out = append(out, diffJSON(p.Index(i), x[i], y[i])...)
		}
		return out
	}
	return []*field.Path{p}
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
