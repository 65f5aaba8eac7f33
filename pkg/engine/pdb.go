package engine

import (
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete

// DisruptionBudgetEnabled reports whether the job asks for a PodDisruptionBudget over its
// workers (schedulingPolicy.podDisruptionBudget.enabled).
func (s *Spec) DisruptionBudgetEnabled() bool {
	b := s.SchedulingPolicy.PodDisruptionBudget
	return b != nil && b.Enabled && len(s.WorkerSets) > 0
}

// BuildPodDisruptionBudget returns the PodDisruptionBudget named like the job over its worker
// pods, or nil when the job asks for none. It allows no voluntary disruption of a worker while
// the workers are meant to run (one lost rank ends an MPI run): minAvailable is the job's
// worker count, 0 once the workers are released or the job has ended (workers kept by
// cleanPodPolicy None, or after a failure with cleanPodPolicyOn Succeeded, are there to be
// inspected, not to be protected), so a drain is never blocked by a job that runs nothing.
func BuildPodDisruptionBudget(s *Spec, workersReleased bool) *policyv1.PodDisruptionBudget {
	if !s.DisruptionBudgetEnabled() {
		return nil
	}
	var minAvailable int32
	if !workersReleased && !s.Plan.Ended {
		minAvailable = s.TotalWorkers()
	}
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: s.childMeta(s.Name, s.JobLabels()),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(minAvailable)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				troupev1.LabelJobUID: string(s.Owner.UID),
				troupev1.LabelRole:   troupev1.RoleWorker,
			}},
		},
	}
	return withSpecHash(pdb)
}

// restorePodDisruptionBudget puts the budget's minAvailable and selector back to want's.
func restorePodDisruptionBudget(curObj, wantObj client.Object) bool {
	cur, want := curObj.(*policyv1.PodDisruptionBudget), wantObj.(*policyv1.PodDisruptionBudget)
	if equality.Semantic.DeepEqual(cur.Spec.MinAvailable, want.Spec.MinAvailable) &&
		equality.Semantic.DeepEqual(cur.Spec.Selector, want.Spec.Selector) && cur.Spec.MaxUnavailable == nil {
		return false
	}
	cur.Spec.MinAvailable, cur.Spec.Selector, cur.Spec.MaxUnavailable = want.Spec.MinAvailable, want.Spec.Selector, nil
	return true
}
