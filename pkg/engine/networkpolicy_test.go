package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// By default a job's pods accept connections only from pods carrying the job's UID; the policy
// is owned and labelled like every child, and enabled: false builds none.
func TestBuildNetworkPolicy(t *testing.T) {
	s := testSpec()
	np := buildNetworkPolicy(s)
	if np == nil {
		t.Fatal("no NetworkPolicy by default")
	}
	own := metav1.LabelSelector{MatchLabels: map[string]string{troupev1.LabelJobUID: string(testOwner.UID)}}
	want := networkingv1.NetworkPolicySpec{
		PodSelector: own,
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &own}}}},
	}
	if diff := cmp.Diff(want, np.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if np.Name != "train" || np.Labels[troupev1.LabelJobUID] != string(testOwner.UID) || len(np.OwnerReferences) != 1 {
		t.Errorf("name %q, labels %v, owners %v: want train, the job's labels and owner", np.Name, np.Labels, np.OwnerReferences)
	}
	s.RunPolicy.NetworkPolicy = &troupev1.NetworkPolicyConfig{Enabled: ptr.To(false)}
	if np := buildNetworkPolicy(s); np != nil {
		t.Errorf("enabled: false built %v", np)
	}
}

// A policy someone opened to other pods is closed again.
func TestRestoreNetworkPolicy(t *testing.T) {
	want := buildNetworkPolicy(testSpec())
	cur := want.DeepCopy()
	cur.Spec.Ingress = append(cur.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	if !restore(cur, want) {
		t.Fatal("restore changed nothing")
	}
	if diff := cmp.Diff(want.Spec, cur.Spec); diff != "" {
		t.Errorf("restored spec (-want +got):\n%s", diff)
	}
}
