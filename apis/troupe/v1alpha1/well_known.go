package v1alpha1

// Labels and annotations the operator puts on children and pods. Users select on the labels;
// the operator itself selects on owner references and the job UID label only, so jobs of two
// kinds may share a name.
const (
	// LabelRole is "master" or "worker" on every pod and on the Job and StatefulSets.
	LabelRole = "troupe.dev/role"
	// LabelWorkerSet names the worker set of a worker pod or StatefulSet.
	LabelWorkerSet = "troupe.dev/worker-set"
	// LabelJobUID carries the owning job's UID on every child and pod; the operator's caches
	// and pod selection key on it.
	LabelJobUID = "troupe.dev/job-uid"
	// LabelJobName carries the owning job's name on every child and pod, whatever its kind, for
	// users: `kubectl logs -l troupe.dev/job-name=NAME --prefix`. Jobs of two kinds may share a
	// name, so the operator never selects on it. Pods of jobs created before v0.2.0 lack it
	// (an upgrade does not restart pods to add a label).
	LabelJobName = "troupe.dev/job-name"
	// LabelManagedBy is ManagedByTroupe on every child but pods. The operator's caches select
	// children by this value, not by the presence of a label, so objects that merely carry a
	// troupe label key never enter its memory (docs/security.md).
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByTroupe is the value of LabelManagedBy on troupe's children.
	ManagedByTroupe = "troupe"

	// AnnotationSpecHash records a hash of the desired child, so the operator rewrites a child
	// only when what it wants changed.
	AnnotationSpecHash = "troupe.dev/spec-hash"
	// AnnotationTemplateHash records, on a worker StatefulSet, a hash of the pod template the
	// operator last wrote; a different one is written only while the job has no live pod.
	AnnotationTemplateHash = "troupe.dev/template-hash"
	// AnnotationSetTemplateHash records, on each Job of a worker set that runs to completion, a
	// hash of the set's pod template before each pod's own hostname and index were added: the
	// Jobs of one set started from one template carry the same.
	AnnotationSetTemplateHash = "troupe.dev/set-template-hash"
	// AnnotationIndexedTemplateHash records, on each Job of such a set, a hash of what its pod
	// template is made of: the set's template hash and what the pod's index adds (its
	// hostname, claims, rank). The operator compares a Job with what the job wants by it,
	// without building the Job's whole template.
	AnnotationIndexedTemplateHash = "troupe.dev/indexed-template-hash"

	// LabelRestartAttempt is the restart attempt (status.restarts when it was created: 0, 1,
	// ...) on every pod of a job with runPolicy.failurePolicy; the operator deletes pods of
	// earlier attempts before it creates the next attempt's.
	LabelRestartAttempt = "troupe.dev/restart-attempt"

	// The kinds' name labels (NameLabel of each kind): each names its job on every child and
	// pod (the operator's pod watch maps a pod to its job by it).
	MPIJobNameLabel     = "mpijob.troupe.dev/name"
	PyTorchJobNameLabel = "pytorchjob.troupe.dev/name"
	HorovodJobNameLabel = "horovodjob.troupe.dev/name"
	ChainerJobNameLabel = "chainerjob.troupe.dev/name"

	// RoleMaster is the value of LabelRole on the master (launcher) Job and its pods.
	RoleMaster = "master"
	// RoleWorker is the value of LabelRole on worker StatefulSets and their pods.
	RoleWorker = "worker"

	// MasterReplicaName names the master's entry in status.replicaStatuses.
	MasterReplicaName = "master"

	// LabelJobsNamespace, set to JobsNamespaceEnabled on a namespace by a cluster admin, opts
	// the namespace in to troupe jobs: the operator guard lets the operator write there, and
	// the policy troupe-job-namespaces admits the creation of jobs there
	// (config/install/operator-guard.yaml; docs/security.md, "Namespaces opted in").
	LabelJobsNamespace = "troupe.dev/jobs"
	// JobsNamespaceEnabled is the value of LabelJobsNamespace that opts a namespace in.
	JobsNamespaceEnabled = "enabled"
)

// LabelsRead are all the labels the operator reads of a pod or of an object no troupe job
// controls: its cache keeps these and drops the rest (a tenant's labels cannot grow it). Each
// kind's name label (NameLabel) is added by its types file (registerKind).
var LabelsRead = []string{LabelJobUID, LabelRole, LabelWorkerSet, LabelRestartAttempt, LabelManagedBy}

// Condition reasons.
const (
	ReasonChildrenCreated  = "ChildrenCreated"
	ReasonCreatingChildren = "CreatingChildren"
	ReasonChildConflict    = "ChildNameConflict"
	// ReasonCreateRefused: the API server refused to create a child of the job (RBAC, an
	// admission policy such as troupe-operator-guard, a ResourceQuota); the message is its.
	ReasonCreateRefused = "CreateRefused"
	ReasonInvalidSpec   = "InvalidSpec"
	// ReasonClaimOfAnotherJob: a pod template of the job mounts a claim another troupe job made
	// (its persistentVolumeClaim.claimName); nothing is created.
	ReasonClaimOfAnotherJob = "ClaimOfAnotherJob"
	// ReasonTooLarge: the job is larger than troupe's bounds (MaxPodsPerJob, MaxSlotsPerPod).
	ReasonTooLarge         = "TooLarge"
	ReasonWorkersReady     = "AllWorkersReady"
	ReasonWorkersNotReady  = "WorkersNotReady"
	ReasonNoWorkers        = "NoWorkerSets"
	ReasonWorkersReleased  = "WorkersReleased"
	ReasonMasterRunning    = "MasterRunning"
	ReasonMasterNotRunning = "MasterNotRunning"
	ReasonMasterSucceeded  = "MasterSucceeded"
	ReasonMasterFailed     = "MasterFailed"
	// ReasonWorkersRunning, ReasonWorkersSucceeded and ReasonWorkersNotRunning are the
	// Running, Succeeded and Complete conditions' reasons for a job without a master (a
	// PyTorchJob of workers only), which runs and ends with its workers.
	ReasonWorkersRunning    = "WorkersRunning"
	ReasonWorkersSucceeded  = "WorkersSucceeded"
	ReasonWorkersNotRunning = "WorkersNotRunning"
	ReasonPodsFailed        = "PodsFailed"
	ReasonNoPodFailures     = "NoPodFailures"
	// ReasonFailedCreate: the API server refused to create pods of the job (a ResourceQuota,
	// Pod Security admission); the message is the API server's.
	ReasonFailedCreate    = "FailedCreate"
	ReasonSuspended       = "JobSuspended"
	ReasonGangScheduled   = "GangScheduled"
	ReasonGangWaiting     = "WaitingForResources"
	ReasonGangPending     = "PodGroupNotCreated"
	ReasonGangUnavailable = "GangProviderUnavailable"
	ReasonNotSuspended    = "JobNotSuspended"
	// ReasonSecretMissing: a Secret of the user's that the pods need (ssh.secretName, an
	// appCodesToSync gitSecretName) is missing or lacks keys; missing children wait for it.
	ReasonSecretMissing = "SecretMissing"
	// ReasonTemplateChangeHeld: a worker StatefulSet's new pod template waits for the job's
	// pods to be gone (ConditionTemplateDrift True).
	ReasonTemplateChangeHeld = "TemplateChangeHeld"
	// ReasonTemplatesCurrent: every worker StatefulSet has the template the operator wants.
	ReasonTemplatesCurrent = "TemplatesCurrent"
	// ReasonGeneratedSecretModified: a generated Secret's data is not what the operator wrote
	// (ConditionSecretTampered True).
	ReasonGeneratedSecretModified = "GeneratedSecretModified"
	// ReasonGeneratedSecretIntact: the generated Secrets hold what the operator wrote.
	ReasonGeneratedSecretIntact = "GeneratedSecretIntact"
	// ReasonGeneratedSecretDeleted: a generated Secret was deleted after the job's pods got
	// its keys; the job fails (Failed condition) rather than run with keys its sshd refuses.
	ReasonGeneratedSecretDeleted = "GeneratedSecretDeleted"
	// ReasonStoppingAttempt: a restart deletes the pods of the failed attempt
	// (ConditionRestarting True).
	ReasonStoppingAttempt = "StoppingAttempt"
	// ReasonStartingAttempt: every pod of the failed attempt is gone; the next attempt's are
	// created (ConditionRestarting True) until its launcher runs.
	ReasonStartingAttempt = "StartingAttempt"
	// ReasonAttemptRunning: the launcher of the attempt after the last restart runs
	// (ConditionRestarting False).
	ReasonAttemptRunning = "AttemptRunning"
	// ReasonWorkerFailed: a worker pod was lost while the launcher ran and no restart is left
	// (ConditionFailed True).
	ReasonWorkerFailed = "WorkerFailed"
	// ReasonWorkerCrashLooping: a worker pod's containers were restarted
	// runPolicy.workerRestartLimit times in one attempt (ConditionFailed True, or the cause of
	// a restart).
	ReasonWorkerCrashLooping = "WorkerCrashLooping"
	// ReasonPodsRestarting: no pod failed, but the kubelet restarted containers of the job's
	// pods (ConditionReplicaFailure True).
	ReasonPodsRestarting = "PodsRestarting"
	// Causes of pods not running, for the WorkersReady and Running conditions and
	// status.reason. The kubelet's other waiting reasons (CreateContainerConfigError,
	// InvalidImageName, ...) are passed on as it names them.
	//
	// ReasonImagePullBackOff: an image cannot be pulled (the kubelet's ErrImagePull and
	// ImagePullBackOff, which alternate, are one cause).
	ReasonImagePullBackOff = "ImagePullBackOff"
	// ReasonCrashLoopBackOff: a container exits and the kubelet restarts it.
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	// ReasonUnschedulable: the scheduler finds no node for pods (their PodScheduled condition).
	ReasonUnschedulable = "Unschedulable"
	// ReasonGangNotAdmitted: the job's PodGroup is not admitted, so its pods wait unscheduled.
	ReasonGangNotAdmitted = "GangNotAdmitted"
	// ReasonNodeLost: pods are on a node that stopped answering (not Ready for longer than the
	// operator's --lost-node-timeout, gone, or marked out of service).
	ReasonNodeLost = "NodeLost"
	// MaxStatusReason is the longest status.reason (its CRD's MaxLength).
	MaxStatusReason = 128
)

// Event reasons. The lifecycle events (Created to TTLExpired, with Paused and Resuming of the
// run modes) each mark one transition of the job, emitted once when the status that records
// it is written (pkg/engine/report.go), so `kubectl describe` reads as the job's story.
const (
	EventChildConflict   = "ChildNameConflict"
	EventInvalidSpec     = "InvalidSpec"
	EventGangUnavailable = "GangProviderUnavailable"
	// EventCreated: the operator created children of the job, one event per reconcile that
	// created any (the message names them).
	EventCreated = "Created"
	// EventGangScheduled: the gang scheduler admitted the job's pods together.
	EventGangScheduled = "GangScheduled"
	// EventWorkersReady: every worker pod of the job is ready.
	EventWorkersReady = "WorkersReady"
	// EventRunning: the master (launcher) runs.
	EventRunning = "Running"
	// EventSuspended: runPolicy.suspend was set; the job's pods are stopped.
	EventSuspended = "Suspended"
	// EventResumed: runPolicy.suspend was cleared; the job's pods start again.
	EventResumed = "Resumed"
	// EventScaled: a worker set's replicas changed; the message gives both counts
	// (EventScaledMessage).
	EventScaled     = "Scaled"
	EventSucceeded  = "Succeeded"
	EventFailed     = "Failed"
	EventTTLExpired = "TTLExpired"
	// EventSecretMissing is the Warning for ReasonSecretMissing.
	EventSecretMissing = ReasonSecretMissing
	// EventScaledOutsideJob: a worker StatefulSet was scaled directly; the operator put its
	// replicas back and says how to scale the job instead.
	EventScaledOutsideJob = "ScaledOutsideJob"
	// EventRestartPolicyOverridden (Warning): the master's template says restartPolicy
	// OnFailure, but a failure policy rule acts on its exit codes, which needs pods not
	// restarted in place: its Job runs them with Never.
	EventRestartPolicyOverridden = "RestartPolicyOverridden"
	// EventSecretTampered is the Warning for ReasonGeneratedSecretModified.
	EventSecretTampered = "SecretTampered"
	// EventRestarting: the job is restarted as a whole; the message is "attempt n of m:
	// <cause>".
	EventRestarting = "Restarting"
	// EventAdopted: a child of the job that had lost its owner reference (it still carries the
	// job's UID label and no other controller) was given it back.
	EventAdopted = "Adopted"
	// EventNodeLost (Warning): a pod of the job on a lost node was deleted at once (grace
	// period 0), so that its replacement can be made.
	EventNodeLost = ReasonNodeLost
)

// Messages of the events whose text tools may parse.
const (
	// EventScaledMessage formats EventScaled's message: the worker set, then the replicas
	// before and after.
	EventScaledMessage = "worker set %s scaled from %d to %d replicas"
)

// Well-known parts of the launcher's wait for its workers (troupe-agent wait), which the
// operator reads back from the master pod's status.
const (
	// ContainerLauncherWait is the launcher's init container that waits for the workers.
	ContainerLauncherWait = "troupe-wait"
	// ExitCodeLauncherWaitTimeout is its exit code when hosts are still missing at the
	// deadline.
	ExitCodeLauncherWaitTimeout int32 = 3
)

// The LauncherWaiting condition: whether the launcher is waiting for its workers now, read
// from its troupe-wait init container. It is distinct from WorkersReady, which counts ready
// worker pods: a launcher may still wait for pods that are ready but do not answer yet, and
// a launcher that gave up leaves WorkersReady as it was.
const (
	// ConditionLauncherWaiting is True while the launcher's wait for its workers runs (or
	// restarts in place), naming the worker hosts that are not ready yet.
	ConditionLauncherWaiting = "LauncherWaiting"
	// ReasonWaitingForWorkers: the wait runs (ConditionLauncherWaiting True).
	ReasonWaitingForWorkers = "WaitingForWorkers"
	// ReasonWaitNotStarted: the launcher has no pod, or its pod has not started the wait.
	ReasonWaitNotStarted = "WaitNotStarted"
	// ReasonWorkersReached: the wait ended with its workers reachable; the launcher runs.
	ReasonWorkersReached = "WorkersReached"
	// ReasonWaitTimedOut: the wait ended with ExitCodeLauncherWaitTimeout, hosts still
	// missing at its deadline; the message quotes the hosts it named.
	ReasonWaitTimedOut = "WaitTimedOut"
	// ReasonWaitFailed: the wait ended with another non-zero exit code.
	ReasonWaitFailed = "WaitFailed"
	// ReasonNoLauncherWait: the job's launcher starts without waiting (no troupe-wait init
	// container: a ChainerJob with backend none, or an operator run without an agent image).
	ReasonNoLauncherWait = "NoLauncherWait"
	// EventWaitingForWorkers: the launcher started waiting for its workers (the message names
	// the hosts not ready yet).
	EventWaitingForWorkers = ReasonWaitingForWorkers
)
