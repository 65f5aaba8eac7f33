package engine

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Volume claims of runPolicy.storage (docs/storage.md). A worker set run by a StatefulSet gets
// its claims as the StatefulSet's volumeClaimTemplates, which its controller makes per pod
// (<name>-<statefulset>-<ordinal>, the pod's hostname) and keeps when the set is scaled down,
// also to zero for a whole-job restart. For the other claims (a worker set whose pods run to
// completion, one Job per pod, and the job's shared claims) the engine does the same itself:
// it creates each missing claim before the pods that mount it and never changes or deletes
// one; the garbage collector deletes them with the job (Delete), or they outlive it (Retain)
// and a job made again with the same name and claims takes them back.
//
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create

// workerClaimName is the claim of template name for the pod of hostname h, as a StatefulSet
// names its claims.
func workerClaimName(name, h string) string { return name + "-" + h }

// sharedClaimName is the job's claim of the shared claim name.
func (s *Spec) sharedClaimName(name string) string { return s.Name + "-" + name }

// claimTemplatesOf are the claim templates of worker set ws (those naming it, or no set).
func (s *Spec) claimTemplatesOf(ws *WorkerSet) []troupev1.WorkerClaimTemplate {
	st := s.RunPolicy.Storage
	if st == nil {
		return nil
	}
	var out []troupev1.WorkerClaimTemplate
	for _, t := range st.ClaimTemplates {
		if len(t.WorkerSets) == 0 || slices.Contains(t.WorkerSets, ws.Name) {
			out = append(out, t)
		}
	}
	return out
}

// withClaimVolume gives the pod template the volume name backed by claim; a volume of the
// same name the template had gives way, as a StatefulSet's claim templates override it.
func withClaimVolume(tmpl *corev1.PodTemplateSpec, name, claim string) {
	tmpl.Spec.Volumes = slices.DeleteFunc(tmpl.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
	tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
}

// withSharedClaims mounts the job's shared claims in a pod template of the job.
func (s *Spec) withSharedClaims(tmpl *corev1.PodTemplateSpec) {
	if st := s.RunPolicy.Storage; st != nil {
		for _, c := range st.SharedClaims {
			withClaimVolume(tmpl, c.Name, s.sharedClaimName(c.Name))
		}
	}
}

// withStatefulSetClaims gives a worker StatefulSet its set's claim templates, kept while the set
// is scaled down and deleted with the StatefulSet (so with the job) unless retained.
func (s *Spec) withStatefulSetClaims(sts *appsv1.StatefulSet, ws *WorkerSet) {
	templates := s.claimTemplatesOf(ws)
	if len(templates) == 0 {
		return
	}
	whenDeleted := appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	if s.RunPolicy.Storage.Retained() {
		whenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	sts.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: whenDeleted, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
	for _, t := range templates {
		// The StatefulSet controller mounts each claim as the volume of the template's name.
		sts.Spec.Template.Spec.Volumes = slices.DeleteFunc(sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == t.Name })
		sts.Spec.VolumeClaimTemplates = append(sts.Spec.VolumeClaimTemplates, corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: t.Name, Labels: managedClaimLabels(s)},
			Spec:       t.Spec,
		})
	}
}

// managedClaimLabels are the labels of the claims a worker StatefulSet's controller makes: the
// job's, and troupe's managed-by, so that the operator's cache holds them as it holds the
// claims the engine makes, and a job mounting one of another job's by name is refused
// (checkMountedClaims). A StatefulSet's claim templates cannot change once it exists: the
// claims of StatefulSets made before this label lack it (docs/storage.md).
func managedClaimLabels(s *Spec) map[string]string {
	l := s.JobLabels()
	l[troupev1.LabelManagedBy] = troupev1.ManagedByTroupe
	return l
}

// buildClaims returns the claims the engine makes itself: the job's shared claims and one per
// pod of each worker set whose pods run to completion, owned by the job unless retained.
func buildClaims(s *Spec) []*corev1.PersistentVolumeClaim {
	st := s.RunPolicy.Storage
	if st == nil {
		return nil
	}
	claim := func(name string, spec corev1.PersistentVolumeClaimSpec) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: s.childMeta(name, s.JobLabels()),
			Spec:       *spec.DeepCopy(),
		}
		if st.Retained() {
			c.OwnerReferences = nil
		}
		markManaged(c)
		return c
	}
	var out []*corev1.PersistentVolumeClaim
	for _, c := range st.SharedClaims {
		out = append(out, claim(s.sharedClaimName(c.Name), c.Spec))
	}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		if !ws.RunsToCompletion {
			continue
		}
		for _, t := range s.claimTemplatesOf(ws) {
			for _, h := range ws.WorkerHostnames() {
				out = append(out, claim(workerClaimName(t.Name, h), t.Spec))
			}
		}
	}
	return out
}

// ensureClaims creates the claims the engine makes (buildClaims) that do not exist yet. An
// existing claim of that name is used only if it is this job's (labelled with its UID), or, for
// retained claims, one an earlier job of this kind and name left (labelled so, and controlled
// by nobody); any other is a conflict: claim names repeat across jobs (<job>-<name>,
// <template>-<job>-worker-<i>), and a claim another job or a tenant made first could hand this
// job's pods data (a checkpoint to load) that is not theirs. No claim is ever changed or deleted
// here. It returns the conflicting claims; the pass then creates nothing.
func (r *Reconciler) ensureClaims(ctx context.Context, s *Spec) ([]childRef, error) {
	var conflicts []childRef
	for _, want := range buildClaims(s) {
		ref := childRef{Kind: "PersistentVolumeClaim", Name: want.Name}
		cur := &corev1.PersistentVolumeClaim{}
		err := r.client.Get(ctx, client.ObjectKeyFromObject(want), cur)
		if apierrors.IsNotFound(err) {
			// Not in the cache: new, or made by someone else (the cache holds troupe's alone).
			err = r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), cur)
		}
		switch {
		case err == nil:
			if !claimIsTheJobs(s, cur) {
				conflicts = append(conflicts, ref)
			}
			continue
		case !apierrors.IsNotFound(err):
			return conflicts, fmt.Errorf("get PersistentVolumeClaim %s: %w", want.Name, err)
		}
		if err := r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return conflicts, createError(ref, err)
		}
	}
	return conflicts, nil
}

// claimIsTheJobs says an existing claim is the job's to mount: troupe's and labelled with the
// job's UID, or a retained claim (no controller) an earlier job of the same kind and name left.
func claimIsTheJobs(s *Spec, c *corev1.PersistentVolumeClaim) bool {
	l := c.Labels
	if l[troupev1.LabelManagedBy] != troupev1.ManagedByTroupe {
		return false
	}
	if l[troupev1.LabelJobUID] == string(s.Owner.UID) {
		return true
	}
	return s.RunPolicy.Storage.Retained() && retainedByEarlierJob(s, c)
}

// retainedByEarlierJob says a troupe claim outlived an earlier job of the same kind and name:
// it has no controller (retained claims have no owner) and the kind's name label names this job.
func retainedByEarlierJob(s *Spec, c *corev1.PersistentVolumeClaim) bool {
	return metav1.GetControllerOf(c) == nil && c.Labels[s.NameLabel] == s.Name
}
