package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Claims a job's pod templates mount by name (a volume's persistentVolumeClaim.claimName). The
// names of the claims troupe makes are predictable (<job>-<name>, <template>-<job>-worker-<i>),
// so a tenant could write a job whose pods mount another job's checkpoints: read them, or plant
// one that the other job loads. Before anything is created, each claim a template names is
// looked up among troupe's claims (the cache holds them alone: CacheOptions); one that another
// troupe job made refuses the job. A claim troupe did not make (the user's own) is not in the
// cache and stays mountable, as is one of this job's or one an earlier job of its kind and
// name retained.

// mountedClaim is a claim a pod template of the job names, and the field that names it.
type mountedClaim struct {
	field string
	claim string
}

// mountedClaims are the claims the job's templates name themselves: not the volumes that
// runPolicy.storage replaces with claims of the job's own (withClaimVolume,
// withStatefulSetClaims).
func (s *Spec) mountedClaims() []mountedClaim {
	var out []mountedClaim
	shared := map[string]bool{}
	if st := s.RunPolicy.Storage; st != nil {
		for _, c := range st.SharedClaims {
			shared[c.Name] = true
		}
	}
	add := func(templateField string, tmpl *corev1.PodTemplateSpec, replaced func(name string) bool) {
		volumes := field.NewPath("spec", "volumes")
		for i, v := range tmpl.Spec.Volumes {
			if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName == "" || replaced(v.Name) {
				continue
			}
			out = append(out, mountedClaim{
				field: templateField + "." + volumes.Index(i).Child("persistentVolumeClaim", "claimName").String(),
				claim: v.PersistentVolumeClaim.ClaimName,
			})
		}
	}
	if s.HasMaster() {
		add(fieldOr(s.Master.TemplateField, "the master's template"), &s.Master.Template, func(name string) bool { return shared[name] })
	}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		templates := s.claimTemplatesOf(ws)
		add(fieldOr(ws.TemplateField, "worker set "+ws.Name+"'s template"), &ws.Template, func(name string) bool {
			return shared[name] || slices.ContainsFunc(templates, func(t troupev1.WorkerClaimTemplate) bool { return t.Name == name })
		})
	}
	return out
}

// fieldOr is a template's field in the job's spec, or how messages name it where the adapter
// gave none.
func fieldOr(templateField, otherwise string) string {
	if templateField != "" {
		return templateField
	}
	return otherwise
}

// checkMountedClaims refuses a job whose pod templates mount a claim another troupe job made
// (a SpecError of reason ClaimOfAnotherJob, naming the field and the other job); other errors
// are the cache's.
func (r *Reconciler) checkMountedClaims(ctx context.Context, s *Spec) error {
	for _, m := range s.mountedClaims() {
		c := &corev1.PersistentVolumeClaim{}
		err := r.client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: m.claim}, c)
		switch {
		case apierrors.IsNotFound(err):
			continue // not troupe's (the user's own), or not made yet
		case err != nil:
			return fmt.Errorf("get PersistentVolumeClaim %s: %w", m.claim, err)
		}
		if !claimIsAnotherJobs(s, c) {
			continue
		}
		return &SpecError{Reason: troupev1.ReasonClaimOfAnotherJob, Err: fmt.Errorf(
			"%s: claim %s belongs to %s, another troupe job; a job's pods mount only claims of their own job, "+
				"claims an earlier job of the same kind and name retained, and claims troupe did not make; nothing is created",
			m.field, m.claim, claimJob(c))}
	}
	return nil
}

// claimIsAnotherJobs says a claim is troupe's and another job's: labelled with another job's
// UID, and not retained (no owner) by an earlier job of this kind and name, whose claims this
// one inherits (two jobs of one kind and name never live at once).
func claimIsAnotherJobs(s *Spec, c *corev1.PersistentVolumeClaim) bool {
	l := c.Labels
	if l[troupev1.LabelManagedBy] != troupev1.ManagedByTroupe || l[troupev1.LabelJobUID] == string(s.Owner.UID) {
		return false
	}
	return !retainedByEarlierJob(s, c)
}

// claimJob names the troupe job a claim belongs to for messages: kind/name as kubectl takes
// it, from the kind's name label (<kind>.troupe.dev/name), with the job's UID.
func claimJob(c *corev1.PersistentVolumeClaim) string {
	name, uid := c.Labels[troupev1.LabelJobName], c.Labels[troupev1.LabelJobUID]
	for k, v := range c.Labels {
		if kind, ok := strings.CutSuffix(k, "."+troupev1.GroupVersion.Group+"/name"); ok {
			return fmt.Sprintf("%s/%s (UID %s)", kind, v, uid)
		}
	}
	if name == "" {
		return "the job of UID " + uid
	}
	return fmt.Sprintf("job %s (UID %s)", name, uid)
}
