package engine

import (
	"context"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deleteUnwanted deletes a child the job may do without (its PodDisruptionBudget, its
// NetworkPolicy: both named like the job) once the job no longer asks for it. obj is an empty
// object of the child's type; an object of that name the job does not control is left alone.
func (r *Reconciler) deleteUnwanted(ctx context.Context, job Object, s *Spec, obj client.Object) error {
	err := r.client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, obj)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, job) || !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if err := r.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s %s: %w", reflect.TypeOf(obj).Elem().Name(), obj.GetName(), err)
	}
	return nil
}
