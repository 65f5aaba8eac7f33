package engine

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete

// NetworkPolicyEnabled reports whether the job's pods are isolated by a NetworkPolicy of its
// own (runPolicy.networkPolicy.enabled): on unless the user turns it off.
func (s *Spec) NetworkPolicyEnabled() bool {
	np := s.RunPolicy.NetworkPolicy
	return np == nil || ptr.Deref(np.Enabled, true)
}

// BuildNetworkPolicy returns the NetworkPolicy named like the job that lets only the job's own
// pods connect to its pods, or nil when the job asks for none. Every port is closed to other
// pods, not only sshd's: MPI's and NCCL's data ports are chosen at run time. The policy selects
// pods by the job's UID, so a job of another kind with the same name is another job. Egress is
// left alone, and NetworkPolicies add up: a policy of the user's may open a port (a metrics
// endpoint) to more pods.
func BuildNetworkPolicy(s *Spec) *networkingv1.NetworkPolicy {
	if !s.NetworkPolicyEnabled() {
		return nil
	}
	ownPods := metav1.LabelSelector{MatchLabels: map[string]string{troupev1.LabelJobUID: string(s.Owner.UID)}}
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: s.childMeta(s.Name, s.JobLabels()),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: ownPods,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: ownPods.DeepCopy()}},
			}},
		},
	}
	return withSpecHash(np)
}

// restoreNetworkPolicy puts the policy's spec back to want's: a policy edited to let other pods
// in is closed again.
func restoreNetworkPolicy(curObj, wantObj client.Object) bool {
	cur, want := curObj.(*networkingv1.NetworkPolicy), wantObj.(*networkingv1.NetworkPolicy)
	if equality.Semantic.DeepEqual(cur.Spec, want.Spec) {
		return false
	}
	cur.Spec = want.Spec
	return true
}
