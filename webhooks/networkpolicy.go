package webhooks

import (
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// defaultNetworkPolicy writes down that the job's pods are isolated (the engine's default), so
// that kubectl get -o yaml shows the switch that turns it off.
func defaultNetworkPolicy(rp *troupev1.RunPolicy) {
	if rp.NetworkPolicy == nil {
		rp.NetworkPolicy = &troupev1.NetworkPolicyConfig{}
	}
	if rp.NetworkPolicy.Enabled == nil {
		rp.NetworkPolicy.Enabled = ptr.To(true)
	}
}
