package engine

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Every function in this file is pure: the desired children are a function of the Spec (and,
// for the worker sets, of whether the workers are released) alone.

// JobLabels are the labels every child and pod of the job carries.
func (s *Spec) JobLabels() map[string]string {
	return map[string]string{
		s.NameLabel:          s.Name,
		troupev1.LabelJobUID: string(s.Owner.UID),
	}
}

// MasterLabels are the labels of the master Job and its pods.
func (s *Spec) MasterLabels() map[string]string {
	l := s.JobLabels()
	l[troupev1.LabelRole] = troupev1.RoleMaster
	return l
}

// WorkerLabels are the labels of one worker set's StatefulSet and pods; they are also the
// StatefulSet's selector, so they include the job UID and never select another job's pods.
func (s *Spec) WorkerLabels(ws *WorkerSet) map[string]string {
	l := s.JobLabels()
	l[troupev1.LabelRole] = troupev1.RoleWorker
	l[troupev1.LabelWorkerSet] = ws.Name
	return l
}

// BuildService returns the headless Service that gives every pod of the job a stable DNS
// name <pod hostname>.<job>.<namespace>.svc. Not-ready addresses are published so that names
// resolve while pods are still starting; MPI launchers look hosts up before they are ready.
func BuildService(s *Spec) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: s.childMeta(s.ServiceName(), s.JobLabels()),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{troupev1.LabelJobUID: string(s.Owner.UID)},
			PublishNotReadyAddresses: true,
		},
	}
	return withSpecHash(svc)
}

// BuildMasterJob returns the batch Job that runs the master pod to completion. The Job is
// suspended while the troupe job is, so its pod is removed and recreated on resume. A failed
// master pod is replaced only once it has fully terminated (podReplacementPolicy Failed), so
// two launchers never run at once.
func BuildMasterJob(s *Spec) *batchv1.Job {
	tmpl := s.podTemplate(s.Master.Template, s.MasterLabels(), nil)
	tmpl.Spec.Hostname = s.MasterHostname()
	tmpl.Spec.Subdomain = s.ServiceName()
	if tmpl.Spec.RestartPolicy == "" {
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: s.childMeta(s.Master.JobName, s.MasterLabels()),
		Spec: batchv1.JobSpec{
			Parallelism:           ptr.To[int32](1),
			Completions:           ptr.To[int32](1),
			BackoffLimit:          ptr.To(s.Master.BackoffLimit),
			ActiveDeadlineSeconds: s.Master.ActiveDeadlineSeconds,
			Suspend:               ptr.To(s.Suspended()),
			PodFailurePolicy:      s.Master.PodFailurePolicy.DeepCopy(),
			PodReplacementPolicy:  ptr.To(batchv1.Failed),
			Template:              tmpl,
		},
	}
	return withSpecHash(job)
}

// BuildWorkerStatefulSet returns the StatefulSet of one worker set. Released workers (the job
// ended or is suspended) are scaled to zero, so no pod keeps holding CPUs or GPUs. Pods start
// in parallel: MPI workers have no start order, and ordered start would bring them up one at
// a time. The update strategy is OnDelete and the template's own hash is recorded: the engine
// decides when a new template may reach pods (drift.go).
func BuildWorkerStatefulSet(s *Spec, ws *WorkerSet, released bool) *appsv1.StatefulSet {
	labels := s.WorkerLabels(ws)
	replicas := ws.Replicas
	if released {
		replicas = 0
	}
	tmpl := s.podTemplate(ws.Template, labels, ws)
	if tmpl.Spec.RestartPolicy == "" {
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: s.childMeta(ws.StatefulSetName, labels),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			ServiceName:         s.ServiceName(),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template:            tmpl,
		},
	}
	setTemplateHash(sts)
	return withSpecHash(sts)
}

// BuildBackendObjects returns the backend's children with the job's labels and owner.
func BuildBackendObjects(s *Spec) []client.Object {
	if s.Backend == nil {
		return nil
	}
	return s.ownedObjects(s.Backend.Objects(s))
}

// BuildGangObjects returns the gang provider's PodGroup, labelled and owned like every child.
func BuildGangObjects(s *Spec) []client.Object {
	if s.Gang == nil {
		return nil
	}
	return s.ownedObjects(s.Gang.Objects(s))
}

// ownedObjects gives objects of a backend or gang provider the job's namespace, labels and
// owner reference, and their spec hash.
func (s *Spec) ownedObjects(objs []client.Object) []client.Object {
	for _, o := range objs {
		meta := s.childMeta(o.GetName(), s.JobLabels())
		maps.Copy(meta.Labels, o.GetLabels())
		o.SetNamespace(meta.Namespace)
		o.SetLabels(meta.Labels)
		o.SetOwnerReferences(meta.OwnerReferences)
		withSpecHash(o)
	}
	return objs
}

// Children returns every desired child of the job, in creation order: objects without pods
// first (Service, backend objects), then the worker sets, then the master, so that the master
// never starts before its hosts can be named.
func Children(s *Spec, workersReleased bool) []client.Object {
	objs := []client.Object{BuildService(s)}
	objs = append(objs, BuildBackendObjects(s)...)
	// The PodGroup exists before any of its pods, so the scheduler never sees a pod of an
	// unknown gang.
	objs = append(objs, BuildGangObjects(s)...)
	if pdb := BuildPodDisruptionBudget(s, workersReleased); pdb != nil {
		objs = append(objs, pdb)
	}
	if np := BuildNetworkPolicy(s); np != nil {
		objs = append(objs, np)
	}
	for i := range s.WorkerSets {
		objs = append(objs, BuildWorkerStatefulSet(s, &s.WorkerSets[i], workersReleased))
	}
	if s.masterWanted() { // not while paused, or waiting for the previous master's pods to go
		objs = append(objs, BuildMasterJob(s))
	}
	for _, o := range objs {
		markManaged(o)
	}
	return objs
}

// markManaged labels a child with the label the operator's caches select it by. It is added
// after the spec hash is taken: it says who manages the child, not what the job wants, so
// adding it to the children of a job created by an older release writes their labels and never
// rewrites a running StatefulSet's template.
func markManaged(o client.Object) {
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[troupev1.LabelManagedBy] = troupev1.ManagedByTroupe
	o.SetLabels(labels)
}

// podTemplate copies a user's pod template and adds the job's labels, the scheduling policy's
// priority class and the backend's wiring. The user's own labels are kept; ours win a clash.
func (s *Spec) podTemplate(user corev1.PodTemplateSpec, labels map[string]string, ws *WorkerSet) corev1.PodTemplateSpec {
	tmpl := *user.DeepCopy()
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	maps.Copy(tmpl.Labels, labels)
	if tmpl.Spec.PriorityClassName == "" {
		tmpl.Spec.PriorityClassName = s.SchedulingPolicy.PriorityClassName
	}
	if s.Backend != nil {
		s.Backend.DecoratePod(s, ws, &tmpl)
	}
	if s.Gang != nil {
		s.Gang.DecoratePod(s, &tmpl)
	}
	s.CodeSync.decoratePod(s, &tmpl)
	s.applyRunMode(&tmpl, ws)
	s.labelRestartAttempt(&tmpl)
	return tmpl
}

func (s *Spec) childMeta(name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       s.Namespace,
		Labels:          maps.Clone(labels),
		OwnerReferences: []metav1.OwnerReference{s.Owner},
	}
}

// withSpecHash records a hash of the object as built, so the engine can tell a change of what
// it wants from a child that merely was defaulted by the API server.
func withSpecHash[T client.Object](obj T) T {
	ann := obj.GetAnnotations()
	delete(ann, troupev1.AnnotationSpecHash)
	obj.SetAnnotations(ann)
	data, err := json.Marshal(obj)
	if err != nil {
		// The object was built from typed API structs, which always marshal.
		panic(fmt.Sprintf("marshal desired %T: %v", obj, err))
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[troupev1.AnnotationSpecHash] = strconv.FormatUint(h.Sum64(), 36)
	obj.SetAnnotations(ann)
	return obj
}

func podOrdinalName(statefulSet string, ordinal int32) string {
	return fmt.Sprintf("%s-%d", statefulSet, ordinal)
}
