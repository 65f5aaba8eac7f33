package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CleanPodPolicy says what happens to a job's pods once its master has ended.
// +kubebuilder:validation:Enum=Running;All;None
type CleanPodPolicy string

const (
	// CleanPodPolicyRunning scales every worker set to zero when the master ends, so no worker
	// keeps holding CPUs or GPUs. The master's pod stays for its logs. This is the default.
	CleanPodPolicyRunning CleanPodPolicy = "Running"
	// CleanPodPolicyAll releases the workers like Running and also deletes the master's pods.
	CleanPodPolicyAll CleanPodPolicy = "All"
	// CleanPodPolicyNone leaves every pod as it is.
	CleanPodPolicyNone CleanPodPolicy = "None"
)

// RunPolicy is the lifecycle policy every troupe kind shares.
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="cannot change once the job exists",fieldPath=".managedBy"
// +kubebuilder:validation:XValidation:rule="!has(self.cleanPodPolicyOn) || self.cleanPodPolicyOn != 'Succeeded' || !((has(self.cleanPodPolicy) && self.cleanPodPolicy == 'None') || (has(self.cleanUpWorkers) && !self.cleanUpWorkers))",message="Succeeded applies the clean-pod policy after success only, and the policy is None: there is nothing to clean",fieldPath=".cleanPodPolicyOn"
// +kubebuilder:validation:XValidation:rule="!has(self.cleanPodPolicy) || !has(self.cleanUpWorkers) || self.cleanUpWorkers == (self.cleanPodPolicy != 'None')",message="cleanUpWorkers and cleanPodPolicy disagree: cleanUpWorkers true means a cleanPodPolicy other than None, false means None"
type RunPolicy struct {
	// cleanPodPolicy says what happens to the job's pods when its master ends: Running (the
	// default) scales the worker sets to zero, All also deletes the master's pods, None keeps
	// every pod.
	// +optional
	CleanPodPolicy *CleanPodPolicy `json:"cleanPodPolicy,omitempty"`

	// ttlSecondsAfterFinished deletes the job, and with it every child, this many seconds after
	// it succeeded or failed. Unset keeps finished jobs until they are deleted by hand.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// suspend stops the job without deleting it: the master Job is suspended (its pods are
	// removed) and the worker sets are scaled to zero. Setting it back to false resumes the job.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// backoffLimit is how many times the master pod is retried before the job fails, when the
	// kind's master section does not set its own. Default 6, as for a batch Job.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// activeDeadlineSeconds bounds the master's run time, when the kind's master section does
	// not set its own. The job fails with reason DeadlineExceeded once it is reached.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// cleanUpWorkers is the T9k MPIJob spelling of the clean-pod policy: true is Running
	// (release the workers when the launcher ends), false is None. Set cleanPodPolicy or
	// cleanUpWorkers, not two that disagree.
	// +optional
	CleanUpWorkers *bool `json:"cleanUpWorkers,omitempty"`

	// cleanPodPolicyOn says when the clean-pod policy applies: Finished (the default) whenever
	// the master ends, Succeeded only when it succeeded (kube-openmpi's autoScaleDownWorkers);
	// after a failure every pod is then left running, for inspection.
	// +optional
	CleanPodPolicyOn *CleanPodPolicyOn `json:"cleanPodPolicyOn,omitempty"`

	// managedBy names the controller that runs the job, as a batch Job's spec.managedBy does:
	// unset, "troupe.dev/troupe-operator" or kubeflow's "kubeflow.org/mpi-operator" and
	// "kubeflow.org/training-operator" is troupe;
	// any other value leaves the job, its children and its status to that controller, and
	// troupe-operator does nothing with it. Kueue's MultiKueue ("kueue.x-k8s.io/multikueue",
	// kubeflow's place for it) reads spec.managedBy instead: written here, it is stored there.
	// It cannot change.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`

	// networkPolicy isolates the job's pods: by default a NetworkPolicy named like the job lets
	// only the job's own pods reach them. Set enabled: false to create none.
	// +optional
	NetworkPolicy *NetworkPolicyConfig `json:"networkPolicy,omitempty"`

	// failurePolicy restarts the job as a whole when one of its ranks is lost: a worker pod
	// fails, is evicted or deleted while the launcher runs, or the launcher Job fails (after its
	// backoffLimit). The launcher and every worker are deleted, and once all of them are gone,
	// created again, up to maxRestarts times; then the job fails. Unset: no restart, and a lost
	// worker does not end the job (its StatefulSet replaces it). rules act on why an attempt
	// failed (exit codes, reasons, replicas); a disruption (eviction, preemption, lost node)
	// restarts without counting. Elastic jobs, which follow their workers as they come and go,
	// take only rules that Ignore or FailJob. It cannot change once the job exists. See
	// docs/failure-handling.md.
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`

	// storage makes volume claims for the job's pods: one per worker pod (claimTemplates) or
	// one per job (sharedClaims), kept across whole-job restarts, deleted with the job or
	// retained. It cannot change once the job exists. See docs/storage.md.
	// +optional
	Storage *Storage `json:"storage,omitempty"`

	// progressDeadlineSeconds is how long a running job that reports its progress may go
	// without a report that moves it forward before it is Stalled: the condition Stalled, an
	// event and, with a failurePolicy, a failure of reason Stalled that its rules act on
	// (default: restart the job). Opt-in: unset, a job is never called stalled; a job that has
	// never reported is never stalled either. The clock starts again when the job starts
	// running (after a restart, a resume). See docs/progress.md.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=604800
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// workerRestartLimit is how many times the containers of one worker pod may be restarted
	// by the kubelet (a crash loop) in one attempt before the worker counts as failed: the job
	// then restarts under failurePolicy, or fails with reason WorkerCrashLooping, instead of
	// waiting for a worker that never comes. Default 3; an elastic HorovodJob has no limit by
	// default (it trains on with the workers that run). See docs/troubleshooting.md.
	// +kubebuilder:validation:Minimum=1
	// +optional
	WorkerRestartLimit *int32 `json:"workerRestartLimit,omitempty"`

	// schedulingPolicy is kubeflow's spelling of the scheduling policy (kubeflow's jobs keep
	// it in runPolicy): its fields fill those spec.schedulingPolicy leaves unset.
	// +optional
	SchedulingPolicy *KubeflowSchedulingPolicy `json:"schedulingPolicy,omitempty"`
}

// GangProvider names the scheduler integration that admits a job's pods all together.
// +kubebuilder:validation:Enum=Volcano;Coscheduling;None
type GangProvider string

const (
	// GangVolcano creates a scheduling.volcano.sh PodGroup and schedules with Volcano.
	GangVolcano GangProvider = "Volcano"
	// GangCoscheduling creates a scheduling.x-k8s.io PodGroup for the scheduler-plugins
	// coscheduling plugin.
	GangCoscheduling GangProvider = "Coscheduling"
	// GangNone schedules pods one by one with the default scheduler.
	GangNone GangProvider = "None"
)

// SchedulingPolicy says how a job's pods are admitted by the scheduler.
type SchedulingPolicy struct {
	// gang selects the gang-scheduling provider. Unset takes the operator's default. It
	// cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cannot change once the job exists"
	// +optional
	Gang *GangProvider `json:"gang,omitempty"`

	// minAvailable is how many of the job's pods must be schedulable together before any is
	// bound. Default: every pod of the job (master and all workers).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinAvailable *int32 `json:"minAvailable,omitempty"`

	// queue is the scheduler queue (Volcano) the job is submitted to.
	// +optional
	Queue string `json:"queue,omitempty"`

	// priorityClassName is given to every pod of the job whose template sets none.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// scheduleTimeoutSeconds is how long the gang may wait to be scheduled as a whole.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`

	// minResources are the resources the gang needs free before any of its pods is bound.
	// Default: the sum of the requests of the minAvailable pods, the master's first.
	// +optional
	MinResources corev1.ResourceList `json:"minResources,omitempty"`

	// podDisruptionBudget protects the job's workers from voluntary disruption (drains,
	// evictions) with a PodDisruptionBudget named like the job.
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetPolicy `json:"podDisruptionBudget,omitempty"`
}

// JobPhase is a one-word summary of where a job is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Suspended;Paused;Resuming;Restarting;Succeeded;Failed
type JobPhase string

const (
	// JobPending: children are being created or pods are waiting to run.
	JobPending JobPhase = "Pending"
	// JobRunning: the master's pod is running (or has just succeeded, and its Job is not yet
	// marked complete).
	JobRunning JobPhase = "Running"
	// JobSuspended: runPolicy.suspend is set; nothing runs.
	JobSuspended JobPhase = "Suspended"
	// JobSucceeded: the master completed successfully.
	JobSucceeded JobPhase = "Succeeded"
	// JobFailed: the master failed for good (retries or deadline exhausted).
	JobFailed JobPhase = "Failed"
)

// Ended reports whether a job in phase p has ended (Succeeded or Failed): a job that ended is
// never started again. It is the one test of a job's end, in the status and in a pass's plan
// (the engine's Plan.Ended is its verdict's).
func (p JobPhase) Ended() bool { return p == JobSucceeded || p == JobFailed }

// Condition types a job reports in status.conditions.
const (
	// ConditionInitialized is True once every child object exists and belongs to the job.
	ConditionInitialized = "Initialized"
	// ConditionWorkersReady is True while every worker pod of every set is ready.
	ConditionWorkersReady = "WorkersReady"
	// ConditionRunning is True while the master's pod runs.
	ConditionRunning = "Running"
	// ConditionReplicaFailure is True when pods of the job failed, even if the master retries.
	ConditionReplicaFailure = "ReplicaFailure"
	// ConditionSuspended is True while runPolicy.suspend is set.
	ConditionSuspended = "Suspended"
	// ConditionSucceeded is True once the master completed successfully.
	ConditionSucceeded = "Succeeded"
	// ConditionFailed is True once the master failed for good.
	ConditionFailed = "Failed"
	// ConditionGangScheduled is True once the scheduler admitted the job's gang (its
	// PodGroup) as a whole; it exists only for jobs with a gang provider.
	ConditionGangScheduled = "GangScheduled"
	// ConditionTemplateDrift is True while a worker StatefulSet's pod template differs from
	// the one the operator would write now (a spec change, or a new operator release) and is
	// held back because pods of the job run; it is written once none runs. It appears only on
	// jobs that have drifted.
	ConditionTemplateDrift = "TemplateDrift"
	// ConditionRestarting is True while the job is restarted as a whole (runPolicy.failurePolicy):
	// reason StoppingAttempt while the pods of the failed attempt go, StartingAttempt while the
	// next attempt's are created, until its launcher runs; then False, reason AttemptRunning
	// (or Succeeded or Failed, when the job ended before its launcher was seen running).
	// Its message is "attempt n of m: <cause>". It appears only on jobs that restarted.
	ConditionRestarting = "Restarting"
	// ConditionAdmitted is Kueue's verdict on a job queued with the kueue.x-k8s.io/queue-name
	// label (docs/kueue.md): False while it waits in its LocalQueue (the message names the
	// queue and says why) or after it was evicted (reason Preempted, ...), True once a
	// ClusterQueue admitted it. It appears only on queued jobs.
	ConditionAdmitted = "Admitted"
	// ConditionSecretTampered is True while a Secret the operator generated for the job (its
	// SSH keys) holds other data than the operator wrote; no missing child is created then, so
	// no launcher starts with foreign keys. It appears only on jobs whose Secret was changed.
	ConditionSecretTampered = "SecretTampered"
)

// ReplicaStatus counts the pods of one replica set of a job: the master or one worker set.
type ReplicaStatus struct {
	// name is "master" for the master, or the worker set's name.
	Name string `json:"name"`
	// replicas is the number of pods this set should have now.
	Replicas int32 `json:"replicas"`
	// ready is the number of pods whose Ready condition is True.
	// +optional
	Ready int32 `json:"ready,omitempty"`
	// active is the number of pods that are pending or running.
	// +optional
	Active int32 `json:"active,omitempty"`
	// succeeded is the number of pods that completed successfully.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// failed is the number of pods that failed.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// restarts is the sum of container restarts over the set's current pods.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`
}

// PodPhaseCounts aggregates the phases of every pod of a job.
type PodPhaseCounts struct {
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// +optional
	Running int32 `json:"running,omitempty"`
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	Unknown int32 `json:"unknown,omitempty"`
}

// JobStatus is the observed state every troupe kind reports. It is computed from the job's
// children on each reconcile and written only when it changed.
type JobStatus struct {
	// phase summarises the job: Pending, Running, Suspended, Succeeded or Failed.
	// +optional
	Phase JobPhase `json:"phase,omitempty"`

	// conditions are the job's detailed state: Initialized, WorkersReady, Running,
	// ReplicaFailure, Suspended, Succeeded and Failed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// replicaStatuses counts pods per replica set: "master" first, then each worker set.
	// +listType=map
	// +listMapKey=name
	// +optional
	ReplicaStatuses []ReplicaStatus `json:"replicaStatuses,omitempty"`

	// pods aggregates the phases of every pod of the job.
	// +optional
	Pods PodPhaseCounts `json:"pods,omitempty"`

	// workers reads "ready/desired" over all worker sets, for kubectl's WORKERS column.
	// +optional
	Workers string `json:"workers,omitempty"`

	// reason says at a glance what holds the job or ended it, for kubectl's REASON column: the
	// cause of its workers or master not running (ImagePullBackOff, CrashLoopBackOff,
	// Unschedulable, GangNotAdmitted, ...; the WorkersReady and Running conditions say more), or
	// the reason of its failure. Empty while nothing is in the way.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Reason string `json:"reason,omitempty"`

	// workerReplicas is the number of worker pods that exist, over all worker sets; with
	// workerSelector it backs the scale subresource of kinds with one worker set.
	// +optional
	WorkerReplicas int32 `json:"workerReplicas,omitempty"`

	// workerSelector selects the job's worker pods (label selector syntax).
	// +optional
	WorkerSelector string `json:"workerSelector,omitempty"`

	// startTime is when the operator first started the job's children.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the job succeeded or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// observedGeneration is the metadata.generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// succeeded is 1 once the master (launcher) completed successfully, else 0
	// (chainer-operator's count).
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`

	// tasks are the pods of each replica type: the master's (type launcher or master) and the
	// workers', with their restarts (T9k's status.tasks).
	// +listType=map
	// +listMapKey=type
	// +optional
	Tasks []TaskStatus `json:"tasks,omitempty"`

	// aggregate counts the job's replicas by state (T9k's status.aggregate).
	// +optional
	Aggregate *Aggregate `json:"aggregate,omitempty"`

	// restarts counts the times the job was restarted as a whole (runPolicy.failurePolicy):
	// the attempt its pods belong to, as their label troupe.dev/restart-attempt says.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`

	// uncountedRestarts counts the restarts that did not count toward
	// runPolicy.failurePolicy.maxRestarts: disruptions, and failures a rule with action
	// RestartJobAndIgnoreMaxRestarts matched. restarts - uncountedRestarts is the budget spent.
	// +optional
	UncountedRestarts int32 `json:"uncountedRestarts,omitempty"`

	// restartsByReason counts the job's restarts by why their attempt failed.
	// +listType=map
	// +listMapKey=reason
	// +optional
	RestartsByReason []RestartCount `json:"restartsByReason,omitempty"`

	// generatedSecrets records each Secret the operator generated for the job (its SSH keys)
	// as the operator wrote it, so that a change or deletion by anyone else is noticed.
	// +listType=map
	// +listMapKey=name
	// +optional
	GeneratedSecrets []GeneratedSecretRecord `json:"generatedSecrets,omitempty"`

	// progress is what the training reported of how far it got (docs/progress.md): the
	// percent, steps, the last metrics, an estimate of when it ends. Absent until it reports.
	// +optional
	Progress *ProgressStatus `json:"progress,omitempty"`
}

// GeneratedSecretRecord is what the operator wrote into one generated Secret.
type GeneratedSecretRecord struct {
	// name is the Secret's name in the job's namespace.
	Name string `json:"name"`
	// sha256 is the hex SHA-256 of the Secret's data (keys in order, each key and value
	// length-prefixed).
	SHA256 string `json:"sha256"`
	// resourceVersion is the Secret's resourceVersion when its data was last seen to match
	// sha256; while it is unchanged the data need not be read again.
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// MPITransport is how an MPI launcher starts its processes on the other hosts of the job.
// +kubebuilder:validation:Enum=SSH;KubeExec
type MPITransport string

const (
	// MPITransportSSH starts remote processes over SSH: every worker runs sshd with a key pair
	// and host key the operator generates for the job alone.
	MPITransportSSH MPITransport = "SSH"
	// MPITransportKubeExec starts remote processes through the API server's pods/exec with the
	// job's own ServiceAccount, which may exec only into the job's pods. No sshd runs.
	MPITransportKubeExec MPITransport = "KubeExec"
)

// SSHConfig configures the SSH transport.
type SSHConfig struct {
	// sshdPath is the sshd binary in the worker image. Workers whose main container sets no
	// command run it with the job's configuration. Default /usr/sbin/sshd.
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must be an absolute path"
	// +optional
	SSHDPath string `json:"sshdPath,omitempty"`

	// port is the port every worker's sshd listens on. It is above 1024 by default so that
	// sshd can run as a non-root user. Default 2222.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`

	// secretName names a Secret of the job's namespace with the SSH identity to use instead of
	// keys the operator generates: key "ssh-privatekey" is the launcher's private key
	// (unencrypted, OpenSSH or PEM format, as a kubernetes.io/ssh-auth Secret holds it) and key
	// "authorized_keys" the public keys every worker's sshd accepts. The host key and
	// known_hosts are still generated for the job. It cannot change.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cannot change once the job exists"
	// +optional
	SecretName string `json:"secretName,omitempty"`
}

// Keys a user's SSH Secret (ssh.secretName) must hold.
const (
	// SSHSecretPrivateKey is the launcher's private key; the key name of a
	// kubernetes.io/ssh-auth Secret.
	SSHSecretPrivateKey = "ssh-privatekey"
	// SSHSecretAuthorizedKeys are the public keys every worker's sshd accepts.
	SSHSecretAuthorizedKeys = "authorized_keys"
)

// MPILaunch says how an MPI launcher reaches the job's workers. Every MPI kind embeds it.
type MPILaunch struct {
	// transport is how the launcher starts processes on the workers: SSH or KubeExec. The
	// default depends on the kind (ChainerJob: KubeExec; MPIJob and HorovodJob: SSH).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cannot change once the job exists"
	// +optional
	Transport MPITransport `json:"transport,omitempty"`

	// ssh configures the SSH transport; it is ignored by KubeExec.
	// +optional
	SSH *SSHConfig `json:"ssh,omitempty"`

	// waitForWorkersTimeoutSeconds bounds how long the launcher waits, before it starts, for
	// every host of its hostfile to resolve and accept it. When the time runs out the job
	// fails with a message naming the hosts still missing. Default 300.
	// +kubebuilder:validation:Minimum=1
	// +optional
	WaitForWorkersTimeoutSeconds *int32 `json:"waitForWorkersTimeoutSeconds,omitempty"`
}
