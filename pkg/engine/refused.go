package engine

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// createRefused is a create of a child that the API server refused: forbidden by RBAC, denied
// by an admission policy or webhook (troupe-operator-guard among them), over a ResourceQuota,
// or invalid. The pass reports it on the job (Initialized False with reason CreateRefused, the
// job's status.reason, a Warning event) and is retried with the controller's backoff: what would
// let the create through (a role, a policy, a quota) is nothing the job's watches see.
type createRefused struct {
	child childRef
	err   error
}

func (e *createRefused) Error() string { return fmt.Sprintf("create %s: %v", e.child, e.err) }

func (e *createRefused) Unwrap() error { return e.err }

// message is the job's Initialized condition's message: the child and the API server's words.
func (e *createRefused) message() string {
	return fmt.Sprintf("the API server refused to create %s: %v", e.child, e.err)
}

// createError wraps the error of a child's create: a refusal (403 or 422) as createRefused,
// anything else (a timeout, a conflict) as it is, retried as any failed pass.
func createError(child childRef, err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return &createRefused{child: child, err: err}
	}
	return fmt.Errorf("create %s: %w", child, err)
}
