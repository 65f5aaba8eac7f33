package webhooks

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// MaxJobBytes bounds a job object as the API server sends it to admission
// (troupev1.MaxJobBytes says why).
const MaxJobBytes = troupev1.MaxJobBytes

// validateSize refuses a job over MaxJobBytes. An update that does not grow a job stored
// before the bound existed is let through: no update that adds nothing is refused.
func validateSize(ctx context.Context) field.ErrorList {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil
	}
	size := len(req.Object.Raw)
	if size <= MaxJobBytes || (req.Operation == admissionv1.Update && size <= len(req.OldObject.Raw)) {
		return nil
	}
	return field.ErrorList{field.TooLong(field.NewPath("spec"), fmt.Sprintf("<a job of %d bytes>", size), MaxJobBytes)}
}

// validateCopiedTemplate refuses a set that runs to completion whose template, copied into one
// batch Job per worker, would make more than troupev1.MaxChildTemplateBytes (its doc says why).
func validateCopiedTemplate(p *field.Path, tmpl *corev1.PodTemplateSpec, replicas int32) field.ErrorList {
	size, total, err := troupev1.CopiedTemplateBytes(tmpl, replicas)
	if err != nil {
		return field.ErrorList{field.InternalError(p, err)}
	}
	if total <= troupev1.MaxChildTemplateBytes {
		return nil
	}
	return field.ErrorList{field.Invalid(p, fmt.Sprintf("<a %d-byte pod template>", size), fmt.Sprintf(
		"%d workers run to completion as one batch Job each, each with this template: %d bytes, more than %d; shrink the template or run fewer workers",
		replicas, total, troupev1.MaxChildTemplateBytes))}
}
