package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// childTypes are every type the operator creates for a job, and pods: the orphan check lists
// their metadata by the job-UID label every child and pod carries.
var childTypes = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Version: "v1", Kind: "Pod"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "batch", Version: "v1", Kind: "Job"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"},
	{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroup"},
}

// orphans lists, once, the objects of ns carrying a job's UID label that have lost their
// owner: the job of the label is gone, or the object has no owner reference, or none of its
// owners exists. Garbage collection removes a gone owner's dependents within seconds, so the
// caller polls until the count settles.
func orphans(ctx context.Context, c client.Client, ns string) ([]string, error) {
	jobs := sets.New[types.UID]()
	for _, k := range kindNames() {
		list, err := listJobs(ctx, c, k, ns)
		if err != nil {
			return nil, err
		}
		for _, j := range list {
			jobs.Insert(j.GetUID())
		}
	}
	var all []metav1.PartialObjectMetadata
	for _, gvk := range childTypes {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := c.List(ctx, l, client.InNamespace(ns), client.HasLabels{troupev1.LabelJobUID})
		if err != nil {
			if gvk.Group == "scheduling.volcano.sh" || gvk.Group == "scheduling.x-k8s.io" {
				continue // a cluster without that gang scheduler
			}
			return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		for _, o := range l.Items {
			o.Kind = gvk.Kind
			all = append(all, o)
		}
	}
	exists := jobs.Clone()
	for _, o := range all {
		exists.Insert(o.UID)
	}
	var out []string
	for _, o := range all {
		owned := slices.ContainsFunc(o.OwnerReferences, func(r metav1.OwnerReference) bool { return exists.Has(r.UID) })
		if !jobs.Has(types.UID(o.Labels[troupev1.LabelJobUID])) || !owned {
			var owners []string
			for _, r := range o.OwnerReferences {
				owner := fmt.Sprintf("%s %s (exists %v)", r.Kind, r.Name, exists.Has(r.UID))
				if !exists.Has(r.UID) {
					owner += ": " + byName(ctx, c, ns, r)
				}
				owners = append(owners, owner)
			}
			why := fmt.Sprintf("%s %s: job exists %v, owners %v", o.Kind, o.Name, jobs.Has(types.UID(o.Labels[troupev1.LabelJobUID])), owners)
			if o.DeletionTimestamp != nil {
				why += fmt.Sprintf(", being deleted since %s, finalizers %v", o.DeletionTimestamp.UTC().Format(time.TimeOnly), o.Finalizers)
			}
			out = append(out, why)
		}
	}
	slices.Sort(out)
	return out, nil
}

// byName says what holds the name of an owner that is gone (by UID), to tell an owner deleted
// for good from one replaced under the same name, or one that lost the job's label.
func byName(ctx context.Context, c client.Client, ns string, r metav1.OwnerReference) string {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(schema.FromAPIVersionAndKind(r.APIVersion, r.Kind))
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.Name}, m)
	switch {
	case apierrors.IsNotFound(err):
		return "none by that name"
	case err != nil:
		return "read by name: " + err.Error()
	}
	return fmt.Sprintf("one by that name has UID %s (the reference's %s), created %s, labels %v, deleting %v",
		m.UID, r.UID, m.CreationTimestamp.UTC().Format(time.TimeOnly), m.Labels, m.DeletionTimestamp != nil)
}

// settledOrphans polls orphans until there are none or timeout passes, and returns the last
// list.
func settledOrphans(ctx context.Context, c client.Client, ns string, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		out, err := orphans(ctx, c, ns)
		if err == nil && len(out) == 0 {
			return nil, nil
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, 2*time.Second) {
			return out, err
		}
	}
}

// percentile is the p-th percentile (0 < p <= 100) of ds, by the nearest-rank method.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}
