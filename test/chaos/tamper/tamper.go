// Package tamper tampers with the children of running troupe jobs, as a careless user, a tool
// or a script would, and measures how long the operator takes to put them back: the tampering
// part of `make chaos` (issue 18). It also creates a foreign object with a child's name before
// a job exists, and checks what the API server alone refuses while the operator (and so its
// admission webhooks) is down. docs/reliability.md, "Tampering with a job's children", says
// what each action ends in and why.
//
// Everything here talks to the API server through the client it is given; nothing assumes a
// particular cluster, so the e2e suite and the chaos harness use the same code.
package tamper

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
)

// Target is one job: Kind is a registered kind's name ("MPIJob").
type Target struct{ Kind, Namespace, Name string }

func (t Target) String() string { return t.Kind + " " + t.Namespace + "/" + t.Name }

// Result is what one tampering did and how the operator answered it.
type Result struct {
	Action string
	Target Target
	// Restored says the child is back in the operator's shape (see Do).
	Restored bool
	// RestoreTime is from the tampering write's return to the first read that saw the child
	// restored.
	RestoreTime time.Duration
	Err         error

	// Child names the child tampered with, e.g. "StatefulSet train-worker".
	Child string
	// Outcome says in words what happened, e.g. "recreated (new UID, same spec hash)" or, for
	// ActionDeleteSSHSecret, "the job failed: GeneratedSecretDeleted".
	Outcome string
	// AsDocumented says the outcome is the one docs/reliability.md promises for the action:
	// Restored for every action of Actions, the job failing for ActionDeleteSSHSecret.
	AsDocumented bool
}

// The actions. Each names the child it acts on; where a job has several of a type (a
// ChainerJob's worker sets), the first by name is taken.
const (
	// ActionDeleteMaster deletes the master (launcher) batch Job, as `kubectl delete job` does
	// (background propagation: its pods go with it).
	// The job's launcher then runs again: one more launcher pod, never beside the old one.
	ActionDeleteMaster = "delete-master-job"
	// ActionDeleteWorkers deletes a worker StatefulSet (background propagation).
	ActionDeleteWorkers = "delete-worker-statefulset"
	// ActionDeleteService deletes the job's headless Service.
	ActionDeleteService = "delete-service"
	// ActionDeleteHostfile deletes the ConfigMap that holds the hostfile.
	ActionDeleteHostfile = "delete-hostfile-configmap"
	// ActionDeleteExecRole deletes the KubeExec transport's Role.
	ActionDeleteExecRole = "delete-exec-role"
	// ActionEditHostfile overwrites the hostfile in its ConfigMap.
	ActionEditHostfile = "edit-hostfile"
	// ActionScaleWorkers scales a worker StatefulSet by hand (one more replica).
	ActionScaleWorkers = "scale-workers"
	// ActionRemoveOwnerRef removes the job's owner reference from a worker StatefulSet.
	ActionRemoveOwnerRef = "remove-owner-reference"
	// ActionDeleteSSHSecret deletes the SSH transport's generated Secret. It is not in
	// Actions: troupe cannot restore the keys running pods hold, and documents that a job whose
	// generated Secret is deleted after it started fails (docs/security.md, "SSH Secret
	// integrity"). Do checks that outcome.
	ActionDeleteSSHSecret = "delete-ssh-secret"
)

// Actions are the tamperings the operator restores for a job of kind with its defaults (its
// default transport: ChainerJob's KubeExec has an exec Role, MPIJob's and HorovodJob's SSH a
// Secret, which is not restorable, see ActionDeleteSSHSecret; a PyTorchJob has neither, nor a
// StatefulSet or a hostfile): those whose child the kind's Sample job has, so every
// registered kind has its own without a list here. ActionsFor gives those of one job as it is.
func Actions(kind string) []string {
	kids, t := sampleChildren(kind)
	var out []string
	for _, a := range allActions {
		if a != ActionDeleteSSHSecret && pickChild(kids, a, t) != nil {
			out = append(out, a)
		}
	}
	return out
}

// JobFailingActions are the tamperings after which a running job of kind fails, as
// documented, rather than being restored: the SSH Secret, for the kinds whose Sample job (the
// default transport) has one.
func JobFailingActions(kind string) []string {
	if kids, t := sampleChildren(kind); pickChild(kids, ActionDeleteSSHSecret, t) != nil {
		return []string{ActionDeleteSSHSecret}
	}
	return nil
}

// sampleChildren are the children of the kind's Sample job with one worker, and its target;
// none for a kind not registered.
func sampleChildren(kind string) ([]client.Object, Target) {
	t := Target{Kind: kind, Namespace: "sample", Name: "sample"}
	k, err := kindOf(kind)
	if err != nil {
		return nil, t
	}
	job := k.Sample(kinds.Sample{Name: t.Name, Namespace: t.Namespace, Image: "sample", WorkerSets: []int32{1}})
	kids, err := desiredChildren(job, t)
	if err != nil {
		return nil, t
	}
	return kids, t
}

// ActionsFor returns the actions of Actions and JobFailingActions that apply to the job as it
// is: those whose child the job has (a ChainerJob with the SSH transport has a Secret and no
// Role, one with backend none has no hostfile).
func ActionsFor(ctx context.Context, c client.Client, t Target) ([]string, error) {
	job, err := getJob(ctx, c, t)
	if err != nil {
		return nil, err
	}
	kids, err := desiredChildren(job, t)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range allActions {
		if pickChild(kids, a, t) != nil {
			out = append(out, a)
		}
	}
	return out, nil
}

var allActions = []string{ActionDeleteMaster, ActionDeleteWorkers, ActionDeleteService, ActionDeleteHostfile,
	ActionDeleteExecRole, ActionEditHostfile, ActionScaleWorkers, ActionRemoveOwnerRef, ActionDeleteSSHSecret}

// pollInterval is how often Do reads the child while it waits for the operator.
const pollInterval = 50 * time.Millisecond

// Do tampers with one child of a running job and waits, up to timeout, until the operator has
// restored it, reading it every 50 ms:
//   - a deleted child is restored when an object of its name exists again with a new UID, the
//     job as its controller, the same troupe.dev/spec-hash as before, and the same content
//     where the engine keeps one (a ConfigMap's data, a Role's rules, a Service's selector, a
//     StatefulSet's replicas);
//   - an edited hostfile when the ConfigMap's data is the operator's again (as before the edit);
//   - a scaled StatefulSet when its replicas are the job's again;
//   - a removed owner reference when the same object (same UID) has the job as its controller
//     again: re-adopted, not replaced or duplicated.
//
// ActionDeleteSSHSecret instead waits for the job to fail with reason GeneratedSecretDeleted
// and no new Secret of that name; Restored stays false and AsDocumented says whether that is
// what happened. The job should be at rest (its children as the operator wants them), e.g.
// Running.
func Do(ctx context.Context, c client.Client, t Target, action string, timeout time.Duration) Result {
	res := Result{Action: action, Target: t}
	job, err := getJob(ctx, c, t)
	if err != nil {
		res.Err = err
		return res
	}
	if p := job.JobStatus().Phase; p == troupev1.JobSucceeded || p == troupev1.JobFailed {
		res.Err = fmt.Errorf("%s is %s: %w", t, p, ErrJobFinished)
		return res
	}
	kids, err := desiredChildren(job, t)
	if err != nil {
		res.Err = err
		return res
	}
	want := pickChild(kids, action, t)
	if want == nil {
		res.Err = fmt.Errorf("%s: the job has no child for action %q (kind, transport or backend)", t, action)
		return res
	}
	before, err := readChild(ctx, c, want)
	if err != nil {
		res.Err = fmt.Errorf("%s: read %s before tampering: %w", t, childName(want), err)
		return res
	}
	res.Child = childName(before)
	if !metav1.IsControlledBy(before, job) {
		res.Err = fmt.Errorf("%s: %s is not controlled by the job before tampering", t, res.Child)
		return res
	}
	tm, ok := tamperings[action]
	if !ok {
		res.Err = fmt.Errorf("unknown action %q", action)
		return res
	}
	if err := tm.apply(ctx, c, before); err != nil {
		res.Err = fmt.Errorf("%s: %s %s: %w", t, action, res.Child, err)
		return res
	}
	start := time.Now()
	if action == ActionDeleteSSHSecret {
		return waitSecretLossFails(ctx, c, t, want, before, start, timeout, res)
	}
	deadline := start.Add(timeout)
	var last string
	for {
		cur, err := readChild(ctx, c, want)
		switch {
		case err == nil:
			var done bool
			done, last = tm.restored(job, before, cur)
			if done {
				res.Restored, res.RestoreTime, res.AsDocumented = true, time.Since(start), true
				res.Outcome = tm.outcome
				return res
			}
		case isNotFound(err):
			last = "absent"
		default:
			last = err.Error()
		}
		if time.Now().After(deadline) {
			res.Outcome = "not restored: " + last
			res.Err = fmt.Errorf("%s: %s %s: not restored within %s (%s)", t, action, res.Child, timeout, last)
			if fin, phase := finished(ctx, c, t); fin {
				res.Outcome = fmt.Sprintf("not restored: the job is %s and a finished job's children are not created again", phase)
				res.Err = fmt.Errorf("%s: %s %s: not restored, the job ended meanwhile (%s): %w", t, action, res.Child, phase, ErrJobFinished)
			}
			return res
		}
		if err := sleep(ctx, pollInterval); err != nil {
			res.Err = err
			return res
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errNoJob is returned when the target does not exist.
var errNoJob = errors.New("job not found")

// ErrJobFinished is in Do's error when the job had ended before the tampering (nothing is
// tampered with), or ended before its child was restored: a finished job's children are never
// created again (docs/architecture.md), so such a result is no failure of the operator.
var ErrJobFinished = errors.New("the job has finished")
