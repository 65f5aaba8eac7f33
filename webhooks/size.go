package webhooks

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// MaxJobBytes bounds a job object as the API server sends it to admission (JSON, the
// last-applied-configuration annotation of kubectl apply included). The operator keeps every
// job of its namespaces in memory, and the engine copies its templates into StatefulSets, Jobs
// and Workloads: without a bound, a few tenants' jobs near etcd's 1.5 MiB limit could make the
// operator run out of memory for every tenant (docs/security.md). A spec of 256 KiB, applied
// with kubectl, fits.
const MaxJobBytes = 512 << 10

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
