package v1alpha1

// PodDisruptionBudgetPolicy asks for a PodDisruptionBudget that protects a job's workers from
// voluntary disruption (node drains, evictions): one lost MPI rank ends the whole run, so the
// budget allows none while the workers are meant to run.
type PodDisruptionBudgetPolicy struct {
	// enabled creates the PodDisruptionBudget <job> over the job's worker pods, with
	// minAvailable the job's worker count (0 once the workers are released). Setting it back
	// to false deletes the budget.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}
