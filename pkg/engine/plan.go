package engine

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The plan's types: what a pass decides (decide.go) beyond the spec, and the parts of each
// decision (the pause, the master's pods, the restart, a failure and what the rules make of it).

// Plan is what one pass decided from a job's spec, its previous status and what it observed:
// the parts of the job's desired state that its spec does not say (the pause, the restart, the
// master held back, the ready workers, the verdict, whether children may be created). decide
// makes it once, after the observation, into a copy of the Spec the adapter described
// (withPlan), so that Spec is never changed and each builder reads one decision, made once.
type Plan struct {
	// Pause is in force: asked (RunMode.Pause) and the job has not finished (planPause). The
	// job's master Job and pods are deleted and its worker sets scaled to zero.
	Pause bool
	// WasPaused says the job's status records a pause (its Paused condition), so its replicas
	// run the Resume overrides from then on.
	WasPaused bool
	// HoldMaster: the master Job is to be created, but pods of a previous one are still
	// terminating (planMasterPods; it is created once they are gone, so that two master pods
	// never share the master's host name), or it waits for its workers to be Ready
	// (Master.AfterWorkersReady).
	HoldMaster bool
	// Restart is where the job is in a whole-job restart (planRestart), and RestartSeen what
	// was seen of the current attempt's failure.
	Restart     RestartState
	RestartSeen RestartObservation
	// ReadyWorkers are the pod hostnames of each worker set (by set name, in ordinal order)
	// whose pods are Ready now, for backends that publish the live membership (elastic
	// discovery).
	ReadyWorkers map[string][]string
	// Verdict is how the job ended (verdict: Succeeded or Failed), "" while it runs.
	Verdict troupev1.JobPhase
	// HoldCreates: no missing child is created this pass (holdCreates).
	HoldCreates bool
	// CompletedWorkers counts the pods of worker sets that run to completion whose Jobs have
	// completed in the current attempt (completedWorkers): they never run again in it, so a
	// gang counts only the rest.
	CompletedWorkers int32
	// Expired: the job ended longer ago than runPolicy.ttlSecondsAfterFinished, at the time of
	// the observation (ttlExpired); the pass deletes it and does nothing else.
	Expired bool
}

// Ended says the job has succeeded or failed: it is never started again, and whatever happens
// to its workers then, nothing is left to protect from a drain (the disruption budget).
func (p Plan) Ended() bool { return p.Verdict.Ended() }

// RestartState is observed, not desired: where the job is in a restart.
type RestartState struct {
	// Attempt is the job's current attempt (status.restarts); the pods get it as their label.
	Attempt int32
	// Stopping holds the workers at zero and creates no master: pods or the master Job of an
	// earlier attempt remain, or the status has not yet recorded that they are gone.
	Stopping bool
	// Deciding leaves the master Job alone for this reconcile: a failure of the current
	// attempt was seen and is recorded (status) before any child changes.
	Deciding bool
	// BackoffLeft is how long the next attempt still waits once the earlier one is gone
	// (restartBackoff; the job stays StoppingAttempt until then), or a failed worker Job a rule
	// ignores before it is made again (workerReplaceDelay).
	BackoffLeft time.Duration
}

// RestartObservation is what the engine saw of the current attempt's failure.
type RestartObservation struct {
	// Cause says why the current attempt failed, naming the pod or Job; "" while it has not.
	Cause string
	// WorkerLost says the cause is a lost worker (the master Job has not failed).
	WorkerLost bool
	// CrashLoop says the lost worker's containers were restarted runPolicy.workerRestartLimit
	// times (crashLoopingWorker).
	CrashLoop bool
	// MasterCrashLoop says the master's containers, restarted in place, reached its Job's
	// backoffLimit (crashLoopingMaster): the Job itself has not failed.
	MasterCrashLoop bool
	// Clean says no pod, master Job or worker pod template of an earlier attempt is left.
	Clean bool
	// Failure is the failure Cause says, as the failure policy's rules match it, and
	// Decision what the policy made of it.
	Failure  Failure
	Decision FailureDecision
}

// holdsMaster says the master Job is not a desired child while a restart stops the old
// attempt or records its failure.
func (r RestartState) holdsMaster() bool { return r.Stopping || r.Deciding }

// Failure is one failure of the current attempt, as the rules match it.
type Failure struct {
	// Replica is the master's replica type (launcher, master) or the failed worker's set.
	Replica string
	// Reason is why the pod failed.
	Reason troupev1.FailureReason
	// ExitCodes are the non-zero exits of the pod's containers (init containers too), by name.
	ExitCodes map[string]int32
}

// FailureDecision is what the failure policy makes of a failure.
type FailureDecision struct {
	// Rule names the rule that matched; "" is the default.
	Rule string
	// Action is what the job does.
	Action troupev1.FailureAction
}

// Counted says the restart spends one of maxRestarts.
func (d FailureDecision) Counted() bool { return d.Action == troupev1.RestartJobAction }

// String says the decision in a condition's message: `rule "oom" (RestartJob)`, or for the
// default, what it is.
func (d FailureDecision) String() string {
	if d.Rule != "" {
		return fmt.Sprintf("rule %q (%s)", d.Rule, d.Action)
	}
	if d.Action == troupev1.RestartJobAndIgnoreMaxRestartsAction {
		return fmt.Sprintf("default rule %q (%s)", troupev1.DisruptionsRule, d.Action)
	}
	return ""
}

// pausePlan is what a pass decides about pause before it observes the children: whether the
// pause asked is in force, and the master Job it deletes for it (nil: none to delete).
type pausePlan struct {
	pause        bool
	deleteMaster *batchv1.Job
}

// masterPodsPlan is what a pass decides about the master's pods once it has observed them:
// those to delete now (a paused job's, rather than left to the garbage collector), and whether
// a master Job to be created waits: for the previous one's pods to be gone, so that two master
// pods never share the master's host name, or for the workers to be Ready.
type masterPodsPlan struct {
	delete     []*corev1.Pod
	holdMaster bool
}

// restartPlan is what one pass decides about a whole-job restart: a pure function of the
// spec, the previous status and the observation (planRestart), part of the pass's decision
// (decide) and carried out with it (carryOut).
type restartPlan struct {
	state RestartState
	seen  RestartObservation
	// staleMasterJob is the master Job of an earlier attempt: deleted (when not being deleted
	// already) and no longer the job's master.
	staleMasterJob *batchv1.Job
	// staleMasterPods are master pods of earlier attempts to delete (the worker pods go with
	// the StatefulSets' scale to zero).
	staleMasterPods []*corev1.Pod
	// launcherToStop is the master Job of a job that failed because a worker was lost with no
	// restart left: suspended, so that its launcher does not run on against a broken group.
	launcherToStop *batchv1.Job
	// replaceWorkerJob is a failed worker Job a rule with action Ignore gave up: deleted, so
	// that the worker set makes it again.
	replaceWorkerJob *batchv1.Job
}

// forgetsMaster says the observed master Job is not the job's master for the rest of the pass:
// it is of an earlier attempt, or its failure is the attempt's, not the job's (the failed
// master Job must not finish the job, and it stays until the next attempt is recorded).
func (p *restartPlan) forgetsMaster() bool { return p.staleMasterJob != nil || p.state.Deciding }
