package integration

import (
	"context"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Every job gets a NetworkPolicy named like it, owned by it, that lets only the job's own pods
// in; one deleted by hand comes back, one loosened by hand is closed again, and
// runPolicy.networkPolicy.enabled: false deletes it.
func TestNetworkPolicyIsolatesTheJob(t *testing.T) {
	ns := newNamespace(t)
	job := smallMPIJob(t, ns)
	createMPIJob(t, job)
	np := waitFor(t, &networkingv1.NetworkPolicy{}, ns, "mpi-example")
	if !metav1.IsControlledBy(np, job) {
		t.Errorf("the NetworkPolicy is not the job's: %v", np.OwnerReferences)
	}
	own := map[string]string{troupev1.LabelJobUID: string(job.UID)}
	if !equalMaps(np.Spec.PodSelector.MatchLabels, own) || np.Labels[troupev1.LabelJobUID] != string(job.UID) {
		t.Errorf("selector %v, labels %v: want the job's pods %v", np.Spec.PodSelector.MatchLabels, np.Labels, own)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].PodSelector == nil ||
		!equalMaps(np.Spec.Ingress[0].From[0].PodSelector.MatchLabels, own) || len(np.Spec.Ingress[0].Ports) != 0 {
		t.Errorf("ingress = %+v, want every port from the job's own pods only", np.Spec.Ingress)
	}

	// Loosened: opened to every pod of the namespace.
	np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	if err := k8s.Update(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, &networkingv1.NetworkPolicy{}, ns, "mpi-example", "closed again", func(p *networkingv1.NetworkPolicy) bool {
		return len(p.Spec.Ingress) == 1
	})

	if err := k8s.Delete(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, &networkingv1.NetworkPolicy{}, ns, "mpi-example", "recreated", func(p *networkingv1.NetworkPolicy) bool {
		return p.UID != np.UID && p.DeletionTimestamp.IsZero()
	})

	kubectl(t, "patch", "-n", ns, "mpijob/mpi-example", "--type=merge", "-p", `{"spec":{"runPolicy":{"networkPolicy":{"enabled":false}}}}`)
	eventually(t, "the NetworkPolicy deleted", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(np), &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}
