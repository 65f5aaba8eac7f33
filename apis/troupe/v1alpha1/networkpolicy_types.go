package v1alpha1

// NetworkPolicyConfig says whether a job's pods are isolated from every other pod by a
// NetworkPolicy of the job's own.
type NetworkPolicyConfig struct {
	// enabled creates the NetworkPolicy <job>, which lets only the job's own pods connect to
	// its pods (sshd, MPI's and NCCL's data ports, every port). Default true; false deletes it.
	// It restricts nothing on a cluster whose network plugin does not enforce NetworkPolicies.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}
