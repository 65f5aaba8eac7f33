package engine

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretRequirement is a Secret of the user's that the job's pods mount, and the keys it must
// hold.
type SecretRequirement struct {
	// Field is the spec field that names the Secret, for example "spec.ssh.secretName".
	Field string
	// Name is the Secret's name in the job's namespace.
	Name string
	// Keys must each be present with a non-empty value.
	Keys []string
}

// checkSecrets reports each required Secret that is missing or lacks a key, with the field
// that names it. The user's Secrets carry none of our labels, so the operator's cache does not
// hold them: they are read from the API server, and read again on a timer while a problem
// lasts (no watch event tells when the user fixes it).
func (r *Reconciler) checkSecrets(ctx context.Context, s *Spec) ([]string, error) {
	var problems []string
	for _, req := range s.RequiredSecrets {
		var secret corev1.Secret
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: req.Name}, &secret)
		switch {
		case apierrors.IsNotFound(err):
			problems = append(problems, fmt.Sprintf("%s: Secret %q not found; create it with the keys %s",
				req.Field, req.Name, strings.Join(req.Keys, ", ")))
			continue
		case err != nil:
			return nil, fmt.Errorf("get Secret %s: %w", req.Name, err)
		}
		var lacking []string
		for _, k := range req.Keys {
			if len(secret.Data[k]) == 0 {
				lacking = append(lacking, k)
			}
		}
		if len(lacking) > 0 {
			problems = append(problems, fmt.Sprintf("%s: Secret %q lacks the keys %s", req.Field, req.Name, strings.Join(lacking, ", ")))
		}
	}
	return problems, nil
}
