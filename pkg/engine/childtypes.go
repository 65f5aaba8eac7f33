package engine

import (
	"maps"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// childType is one type of object a job may have as a child. The table below is the one list of
// them: the reconciler watches each (SetupWithManager), the cache holds each only when it is
// troupe's (CacheOptions), and restore puts an owned one back in shape with its restoreSpec.
// A new child type is a line here; the gang providers' PodGroups, whose CRDs a cluster may not
// serve, are added beside them at run time (NewReconciler's owned, Gang.Restore).
type childType struct {
	// object is an empty object of the type.
	object client.Object
	// metadataOnly types are watched and cached as metadata (OwnedSecret): their data never
	// enters the operator's memory.
	metadataOnly bool
	// restoreSpec puts the fields the engine manages of an owned child (cur) back to the
	// desired ones (want, of the same type) and reports whether it changed anything; nil: the
	// engine manages the type's labels and spec hash only.
	restoreSpec func(cur, want client.Object) bool
}

var childTypes = []childType{
	{object: &batchv1.Job{}, restoreSpec: restoreMasterJob},
	{object: &appsv1.StatefulSet{}, restoreSpec: restoreStatefulSet},
	{object: &corev1.Service{}, restoreSpec: restoreService},
	{object: &corev1.ConfigMap{}, restoreSpec: restoreConfigMap},
	// A Secret's data is generated once (Generator) and never rewritten.
	{object: &corev1.Secret{}, metadataOnly: true},
	// A ServiceAccount has nothing the engine manages beyond its labels.
	{object: &corev1.ServiceAccount{}},
	{object: &rbacv1.Role{}, restoreSpec: restoreRole},
	{object: &rbacv1.RoleBinding{}, restoreSpec: restoreRoleBinding},
	{object: &policyv1.PodDisruptionBudget{}, restoreSpec: restorePodDisruptionBudget},
	{object: &networkingv1.NetworkPolicy{}, restoreSpec: restoreNetworkPolicy},
}

// cacheObject is the object the cache and the watch know the type by.
func (t childType) cacheObject() client.Object {
	if t.metadataOnly {
		return OwnedSecret()
	}
	return t.object
}

// restoreSpecOf is the restoreSpec of want's type, or nil.
func restoreSpecOf(want client.Object) func(cur, want client.Object) bool {
	wt := reflect.TypeOf(want)
	for _, t := range childTypes {
		if reflect.TypeOf(t.object) == wt {
			return t.restoreSpec
		}
	}
	return nil
}

func restoreStatefulSet(cur, want client.Object) bool {
	c, w := cur.(*appsv1.StatefulSet), want.(*appsv1.StatefulSet)
	changed := false
	if !equality.Semantic.DeepEqual(c.Spec.Replicas, w.Spec.Replicas) {
		c.Spec.Replicas = w.Spec.Replicas
		changed = true
	}
	if c.Spec.UpdateStrategy.Type != w.Spec.UpdateStrategy.Type {
		// A StatefulSet of an older release rolls its pods on a template change.
		c.Spec.UpdateStrategy = w.Spec.UpdateStrategy
		changed = true
	}
	return restoreTemplate(c, w) || changed
}

func restoreMasterJob(cur, want client.Object) bool {
	c, w := cur.(*batchv1.Job), want.(*batchv1.Job)
	changed := restoreSchedulingDirectives(c, w)
	if !equality.Semantic.DeepEqual(c.Spec.Suspend, w.Spec.Suspend) {
		c.Spec.Suspend = w.Spec.Suspend
		changed = true
	}
	return changed
}

func restoreService(cur, want client.Object) bool {
	c, w := cur.(*corev1.Service), want.(*corev1.Service)
	if maps.Equal(c.Spec.Selector, w.Spec.Selector) && c.Spec.PublishNotReadyAddresses == w.Spec.PublishNotReadyAddresses {
		return false
	}
	c.Spec.Selector = w.Spec.Selector
	c.Spec.PublishNotReadyAddresses = w.Spec.PublishNotReadyAddresses
	return true
}

func restoreConfigMap(cur, want client.Object) bool {
	c, w := cur.(*corev1.ConfigMap), want.(*corev1.ConfigMap)
	if maps.Equal(c.Data, w.Data) {
		return false
	}
	c.Data = w.Data
	return true
}

func restoreRole(cur, want client.Object) bool {
	c, w := cur.(*rbacv1.Role), want.(*rbacv1.Role)
	if equality.Semantic.DeepEqual(c.Rules, w.Rules) {
		return false
	}
	c.Rules = w.Rules
	return true
}

func restoreRoleBinding(cur, want client.Object) bool {
	c, w := cur.(*rbacv1.RoleBinding), want.(*rbacv1.RoleBinding)
	if equality.Semantic.DeepEqual(c.Subjects, w.Subjects) {
		return false
	}
	c.Subjects = w.Subjects
	return true
}
