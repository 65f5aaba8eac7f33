package v1alpha1

// CleanPodPolicyOn says after which end of the master the clean-pod policy applies.
// +kubebuilder:validation:Enum=Finished;Succeeded
type CleanPodPolicyOn string

const (
	// CleanPodPolicyOnFinished applies the clean-pod policy whenever the master ends, in
	// success or failure. This is the default.
	CleanPodPolicyOnFinished CleanPodPolicyOn = "Finished"
	// CleanPodPolicyOnSucceeded applies it only when the master succeeded (kube-openmpi's
	// autoScaleDownWorkers); after a failure every pod is left as it is, for inspection.
	CleanPodPolicyOnSucceeded CleanPodPolicyOn = "Succeeded"
)
