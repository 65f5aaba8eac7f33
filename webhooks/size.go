package webhooks

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
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
