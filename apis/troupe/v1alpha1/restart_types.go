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

	// rules say what a failure does, by why it happened: the first rule that matches a failure
	// decides; a failure no rule matches restarts the job, and counts toward maxRestarts, but
	// for a disruption (Evicted, Preempted, NodeLost), which restarts it without counting.
	// See docs/failure-handling.md.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Rules []FailureRule `json:"rules,omitempty"`
}

// FailureRule matches a failure of the job's current attempt, by every criterion it gives (a
// rule with none matches every failure), and names what the job does then.
type FailureRule struct {
	// name names the rule in the job's status and events.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// action is what a matching failure does: FailJob fails the job at once; RestartJob
	// restarts it as a whole, counting toward maxRestarts (when none is left the job fails);
	// RestartJobAndIgnoreMaxRestarts restarts it without counting; Ignore leaves the job
	// running and the lost worker is replaced (only for workers: a failed launcher or master
	// ends its attempt).
	// +required
	Action FailureAction `json:"action"`

	// onExitCodes matches a failure whose pod's container ended with one of these codes: the
	// launcher's or master's (its Job failed), or a worker's.
	// +optional
	OnExitCodes *ExitCodeMatch `json:"onExitCodes,omitempty"`

	// onReasons matches a failure whose pod failed for one of these reasons.
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +optional
	OnReasons []FailureReason `json:"onReasons,omitempty"`

	// onReplicas matches a failure of one of these replicas: the launcher (MPIJob, HorovodJob)
	// or master (ChainerJob, PyTorchJob), or a worker set by its name (worker; a ChainerJob's
	// workerSets[].name).
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	OnReplicas []string `json:"onReplicas,omitempty"`
}

// ExitCodeMatch matches the exit code of one container of the failed pod.
// +kubebuilder:validation:XValidation:rule="has(self.values) || has(self.ranges)",message="give values or ranges of exit codes"
type ExitCodeMatch struct {
	// containerName is the container whose exit code is matched; default the replica's main
	// container (the one troupe gives the job's environment).
	// +kubebuilder:validation:MaxLength=63
	// +optional
	ContainerName *string `json:"containerName,omitempty"`

	// values are exit codes, 1 to 255 (0 is success, never a failure).
	// +listType=set
	// +kubebuilder:validation:MaxItems=255
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=255
	// +optional
	Values []int32 `json:"values,omitempty"`

	// ranges are ranges of exit codes, both ends included.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Ranges []ExitCodeRange `json:"ranges,omitempty"`
}

// ExitCodeRange is the exit codes from..to, both included.
// +kubebuilder:validation:XValidation:rule="self.from <= self.to",message="from must not be above to"
type ExitCodeRange struct {
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=255
	// +required
	From int32 `json:"from"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=255
	// +required
	To int32 `json:"to"`
}

// FailureAction is what a failure policy rule does with a failure it matches.
// +kubebuilder:validation:Enum=FailJob;RestartJob;RestartJobAndIgnoreMaxRestarts;Ignore
type FailureAction string

const (
	// FailJobAction fails the job at once, whatever restarts are left.
	FailJobAction FailureAction = "FailJob"
	// RestartJobAction restarts the job as a whole, counting toward maxRestarts.
	RestartJobAction FailureAction = "RestartJob"
	// RestartJobAndIgnoreMaxRestartsAction restarts the job as a whole without counting.
	RestartJobAndIgnoreMaxRestartsAction FailureAction = "RestartJobAndIgnoreMaxRestarts"
	// IgnoreAction leaves the job running: the lost worker is replaced (workers only).
	IgnoreAction FailureAction = "Ignore"
)

// FailureReason is why a pod of the job failed, as the failure policy's rules and
// status.restartsByReason name it.
// +kubebuilder:validation:Enum=Evicted;Preempted;NodeLost;OOMKilled;DeadlineExceeded;Deleted;CrashLoop;Error;Stalled
type FailureReason string

const (
	// FailureEvicted: evicted by the kubelet (node pressure, node shutdown) or through the
	// Eviction API (kubectl drain).
	FailureEvicted FailureReason = "Evicted"
	// FailurePreempted: preempted by the scheduler for a pod of higher priority.
	FailurePreempted FailureReason = "Preempted"
	// FailureNodeLost: its node went away (deleted, unreachable past its tolerations).
	FailureNodeLost FailureReason = "NodeLost"
	// FailureOOMKilled: a container was killed for running out of memory.
	FailureOOMKilled FailureReason = "OOMKilled"
	// FailureDeadlineExceeded: it ran past its activeDeadlineSeconds.
	FailureDeadlineExceeded FailureReason = "DeadlineExceeded"
	// FailureDeleted: deleted, or replaced, by someone other than troupe.
	FailureDeleted FailureReason = "Deleted"
	// FailureCrashLoop: a worker's containers were restarted runPolicy.workerRestartLimit times.
	FailureCrashLoop FailureReason = "CrashLoop"
	// FailureError: a container exited with a non-zero code (onExitCodes tells which).
	FailureError FailureReason = "Error"
	// FailureStalled: the job reported no progress within runPolicy.progressDeadlineSeconds
	// (a rank stuck in a collective, a dead data loader); the failure is the job's, not a
	// pod's.
	FailureStalled FailureReason = "Stalled"
)

// Disruption says the reason is one the pod did not cause: the default failure policy
// restarts the job for it without counting toward maxRestarts.
func (r FailureReason) Disruption() bool {
	return r == FailureEvicted || r == FailurePreempted || r == FailureNodeLost
}

// RestartCount is how many times the job restarted for one reason.
type RestartCount struct {
	// reason is why the attempts failed.
	// +required
	Reason FailureReason `json:"reason"`
	// count is how many restarts it caused.
	// +required
	Count int32 `json:"count"`
}

// DisruptionsRule names the default rule that restarts a job without counting toward
// maxRestarts when a pod was Evicted, Preempted or its node lost, and no rule of the user's
// matched: the Restarting condition's message names it.
const DisruptionsRule = "disruptions"

// ReasonFailJobRule is the Failed condition's reason when a failure policy rule with action
// FailJob matched; the message names the rule and the failure.
const ReasonFailJobRule = "FailJobRule"

// MaxRestartsLimit bounds runPolicy.failurePolicy.maxRestarts (the CRD's Maximum says the
// same): a job that lost a rank a thousand times will not run on the thousand-and-first.
const MaxRestartsLimit = 1000

// JobRestarting: the job is restarted as a whole; the pods of the failed attempt are being
// deleted, or the next attempt's launcher is not running yet.
const JobRestarting JobPhase = "Restarting"
