package v1alpha1

// FailurePolicy is runPolicy.failurePolicy: how often the job is restarted as a whole when one
// of its ranks is lost, as JobSet's failurePolicy restarts all of its Jobs. An MPI run cannot
// lose a rank and go on; a restart deletes the launcher and every worker and creates them
// again, the Service, hostfile and credentials staying.
type FailurePolicy struct {
	// maxRestarts is how many times the job is restarted before a lost rank fails it; 0 fails
	// the job at the first worker lost while its launcher runs, naming the pod. Each restart
	// gives the launcher Job its backoffLimit again. Required: a failure policy without a
	// count would read as "no restart" and as "restart" alike; leave failurePolicy out for
	// troupe's default, no restart and no failure for a lost worker.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +required
	MaxRestarts int32 `json:"maxRestarts"`
}

// MaxRestartsLimit bounds runPolicy.failurePolicy.maxRestarts (the CRD's Maximum says the
// same): a job that lost a rank a thousand times will not run on the thousand-and-first.
const MaxRestartsLimit = 1000

// JobRestarting: the job is restarted as a whole; the pods of the failed attempt are being
// deleted, or the next attempt's launcher is not running yet.
const JobRestarting JobPhase = "Restarting"
