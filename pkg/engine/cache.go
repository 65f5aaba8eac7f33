package engine

import (
	"context"
	"fmt"
	"reflect"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// CacheOptions restricts the operator's informers to troupe's own objects and trims pods to
// the few fields the engine reads, so the operator's memory grows with the jobs' objects, not
// with the cluster, and no tenant can grow it with objects of its own (docs/security.md):
//   - children are selected by the value of the managed-by label (plus the presence of the job
//     UID label), not by the presence of a label anyone may set by mistake;
//   - Secrets are watched metadata-only (see ownedSecret): their data never enters the cache;
//   - pods carry only the labels of their job's templates (adding one would roll running
//     workers), so they are selected by the job UID label and trimmed to a few hundred bytes.
//
// namespaces limits every informer to those namespaces (--watch-namespaces); none means all.
// owned are the types of extra children (PodGroups) to filter the same way.
func CacheOptions(namespaces []string, owned ...client.Object) (cache.Options, error) {
	hasJobUID, err := labels.NewRequirement(troupev1.LabelJobUID, selection.Exists, nil)
	if err != nil {
		return cache.Options{}, fmt.Errorf("job UID selector: %w", err)
	}
	managed, err := labels.NewRequirement(troupev1.LabelManagedBy, selection.Equals, []string{troupev1.ManagedByTroupe})
	if err != nil {
		return cache.Options{}, fmt.Errorf("managed-by selector: %w", err)
	}
	ourPods := labels.NewSelector().Add(*hasJobUID)
	ours := labels.NewSelector().Add(*managed, *hasJobUID)
	opts := cache.Options{
		DefaultTransform: stripFieldsNotRead,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: ourPods, Transform: trimPod},
			// Read only when lost nodes are handled (lost_nodes.go).
			&corev1.Node{}: {Transform: trimNode},
		},
	}
	// The selector keeps out what is not labelled as troupe's; anyone who may label an object
	// gets past it, so what no troupe job controls is held as its name and troupe's labels.
	children := cache.ByObject{Label: ours, Transform: trimUnlessTroupes}
	for _, t := range childTypes {
		opts.ByObject[t.cacheObject()] = cache.ByObject{Label: ours, Transform: t.cacheTransform}
	}
	// Claims the engine made (storage.go): read to know they exist, never watched for passes.
	opts.ByObject[&corev1.PersistentVolumeClaim{}] = children
	for _, o := range owned {
		opts.ByObject[o] = children
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts, nil
}

// trimPod is the pods' cache transform: it stores each pod as a cachedPod, what the engine
// reads of it (newCachedPod says what; at 200 jobs of 9 pods, the heap in use at the end of a
// bench run fell from 28.7 MB to 23.6 MB when the labels and conditions of others were dropped,
// and again when the corev1.Pod itself gave way to the record; docs/performance.md). It is also
// the pod watch's list of what matters (podChanged compares two versions as held here): a change
// only of what is dropped queues no pass.
//
// It also records a worker that is going before the cache holds it so (workersGone).
func trimPod(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		recordGoing(pod, time.Now())
		return newCachedPod(pod), nil
	}
	return obj, nil
}

// trimUnlessTroupes is the transform of every child type's cache: a child a troupe job controls
// is held as stripFieldsNotRead leaves it (the engine puts it back in shape from it); anything
// else that carries troupe's labels (an object a tenant labelled so, an orphan, a retained
// claim) is held as its identity, the labels the engine reads and its controller, so a
// tenant's ConfigMap of 1 MiB costs the operator a few hundred bytes. What the engine does with
// such an object reads no more: it names a name conflict, or it reads an orphan live before
// adopting it (observe).
func trimUnlessTroupes(in any) (any, error) {
	in, err := stripFieldsNotRead(in)
	if err != nil {
		return in, err
	}
	obj, ok := in.(client.Object)
	if !ok || controlledByATroupeJob(obj) {
		return in, nil
	}
	var out client.Object
	if u, isUnstructured := obj.(*unstructured.Unstructured); isUnstructured {
		out = &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
	} else {
		out = reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
		out.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	}
	out.SetName(obj.GetName())
	out.SetNamespace(obj.GetNamespace())
	out.SetUID(obj.GetUID())
	out.SetResourceVersion(obj.GetResourceVersion())
	out.SetCreationTimestamp(obj.GetCreationTimestamp())
	out.SetDeletionTimestamp(obj.GetDeletionTimestamp())
	out.SetLabels(labelsRead(obj.GetLabels()))
	out.SetOwnerReferences(controllerOnly(obj.GetOwnerReferences()))
	return out, nil
}

// cacheTransform is the transform of the type's cache: trimUnlessTroupes, then the type's trim
// of what is the job's own.
func (t childType) cacheTransform(in any) (any, error) {
	out, err := trimUnlessTroupes(in)
	if err != nil || t.trim == nil {
		return out, err
	}
	if obj, ok := out.(client.Object); ok && controlledByATroupeJob(obj) {
		t.trim(obj)
	}
	return out, nil
}

// controlledByATroupeJob says obj's controller is a troupe job (of any kind).
func controlledByATroupeJob(obj metav1.Object) bool {
	c := metav1.GetControllerOf(obj)
	if c == nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(c.APIVersion)
	return err == nil && gv.Group == troupev1.GroupVersion.Group
}

var stripManagedFields = cache.TransformStripManagedFields()

// stripFieldsNotRead drops what the operator never reads from every cached object without a
// transform of its own (jobs among them): the managed fields, and the copy of the whole object
// that kubectl apply keeps in the last-applied-configuration annotation, which doubles the
// memory of every job applied with kubectl. Nothing writes a job back whole from the cache
// (status writes go to the status subresource; the Kueue integration patches what it changes),
// so the stored annotation stays.
func stripFieldsNotRead(in any) (any, error) {
	in, err := stripManagedFields(in)
	if err != nil {
		return in, err
	}
	obj, err := meta.Accessor(in)
	if err != nil {
		return in, nil //nolint:nilerr // not an object: nothing to strip
	}
	if a := obj.GetAnnotations(); a != nil {
		if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
			delete(a, corev1.LastAppliedConfigAnnotation)
			obj.SetAnnotations(a)
		}
	}
	obj.SetNamespace(shared(obj.GetNamespace()))
	if l := obj.GetLabels(); len(l) > 0 {
		obj.SetLabels(sharedMap(l))
	}
	obj.SetOwnerReferences(sharedRefs(obj.GetOwnerReferences()))
	return in, nil
}

// podChanged lets a pod's event queue a pass of a job of the kind whose name label is nameLabel
// only when the pod is one of that kind's jobs' pods, and an update only when something the
// engine reads of the pod changed. Every kind's controller watches every troupe pod through the
// shared informer: a pod of another kind costs each of them one label lookup, and only its own
// kind compares the two versions. What the engine reads of a pod is what trimPod keeps, so an
// update compares the versions as trimPod left them in the cache: one list of fields
// (trimPod's) decides both what the cache holds and what wakes a job, and an update that leaves
// every kept field alike (a kubelet's rewrite of probe times, an annotation set by someone, a
// container's image ID) costs no pass.
func podChanged(nameLabel string) predicate.Funcs {
	ours := func(o client.Object) bool { return hasLabel(o, nameLabel) }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return ours(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return ours(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return ours(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !ours(e.ObjectOld) && !ours(e.ObjectNew) {
				return false
			}
			older, okOld := cachedForm(e.ObjectOld)
			newer, okNew := cachedForm(e.ObjectNew)
			return !okOld || !okNew || !sameForEngine(older, newer)
		},
	}
}

// hasLabel says o carries the label key.
func hasLabel(o client.Object, key string) bool {
	_, ok := o.GetLabels()[key]
	return ok
}

// jobUIDField indexes the operator's cached pods, and worker Jobs, by the value of their job
// UID label. A
// list by label selector scans every cached pod of the namespace and matches each one's labels,
// so a pass over one job cost O(pods of every job in the namespace), the largest item of the
// operator's CPU profile at 200 jobs (docs/performance.md); through the index a pass reads its
// own job's pods only.
const jobUIDField = "metadata.labels." + troupev1.LabelJobUID

// SetupIndexes registers the cache indexes the engine's reconcilers list by. Every kind's
// reconciler shares the manager's cache, so it is called once per manager (kinds.SetupControllers),
// before the reconcilers are set up.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Pod{}, jobUIDField, jobUIDOf); err != nil {
		return fmt.Errorf("index pods by %s: %w", troupev1.LabelJobUID, err)
	}
	// The jobs with pods on a node whose health changed are found by it (jobsOnNode).
	if err := indexer.IndexField(ctx, &corev1.Pod{}, nodeNameField, func(o client.Object) []string {
		if p, ok := cachedForm(o); ok && p.nodeName != "" {
			return []string{p.nodeName}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	// A job's worker Jobs of indexes it no longer asks for are found by it (surplusWorkerJobs).
	if err := indexer.IndexField(ctx, &batchv1.Job{}, jobUIDField, jobUIDOf); err != nil {
		return fmt.Errorf("index Jobs by %s: %w", troupev1.LabelJobUID, err)
	}
	return nil
}

// jobUIDOf is the value a pod or Job is indexed under: its job UID label, if it has one.
func jobUIDOf(o client.Object) []string {
	if uid, ok := o.GetLabels()[troupev1.LabelJobUID]; ok {
		return []string{uid}
	}
	return nil
}
