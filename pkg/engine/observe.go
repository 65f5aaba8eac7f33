package engine

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// currentMasterPod is the newest master pod that is not being deleted: the launcher's current
// attempt (a Job that retries keeps the failed pods of earlier ones).
func currentMasterPod(masterPods []*corev1.Pod) *corev1.Pod {
	var newest *corev1.Pod
	for _, p := range masterPods {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if newest == nil || newest.CreationTimestamp.Before(&p.CreationTimestamp) ||
			(newest.CreationTimestamp.Equal(&p.CreationTimestamp) && newest.Name < p.Name) {
			newest = p
		}
	}
	return newest
}

// Observed is what the engine saw of a job's children on one reconcile.
type Observed struct {
	// Progress is the progress endpoint's latest report of the job, nil without one.
	Progress *ProgressReport
	// MasterJob is the job's batch Job, nil when it does not exist (or is not the job's).
	MasterJob *batchv1.Job
	// Verdict is the master's verdict (masterVerdict): Succeeded or Failed once it is in, ""
	// while the master runs. It is computed once, when the observation is complete; a restart
	// that sets the master Job aside for the pass (restart.go) clears it with MasterJob.
	Verdict troupev1.JobPhase
	// StatefulSets holds the job's worker StatefulSets by worker set name, and WorkerJobs the
	// Jobs of its worker sets that run to completion, by set name (one per pod, by index);
	// SurplusWorkerJobs are such Jobs of indexes the job no longer asks for (a scale-down).
	StatefulSets      map[string]*appsv1.StatefulSet
	WorkerJobs        map[string][]*batchv1.Job
	SurplusWorkerJobs []*batchv1.Job
	// Pods are the job's pods (selected by the job UID label); MasterPods and WorkerPods (by
	// worker set name) are the same pods split by role once (setPods), terminating ones
	// included, so that no step tells them apart again.
	Pods       []corev1.Pod
	MasterPods []*corev1.Pod
	WorkerPods map[string][]*corev1.Pod
	// Attempt is the restart attempt the job's pods of now carry (currentAttempt);
	// AttemptWorkerPods are WorkerPods of that attempt by set, and StalePods the job's pods of
	// any other attempt, which a restart deletes before it starts the next (restart.go).
	Attempt           int32
	AttemptWorkerPods map[string][]*corev1.Pod
	StalePods         []*corev1.Pod
	// Conflicts are children whose name is taken by an object the job does not own.
	Conflicts []childRef
	// Refused is the create of a child the API server refused in this pass, if one was.
	Refused *createRefused
	// Orphans are children of the job's found without their owner reference (adoptable): they
	// count as the job's, and act adopts them back before anything else.
	Orphans []claimedChild
	// Missing are children that do not exist (yet).
	Missing []childRef
	// Gang is the job's PodGroup, nil when it has none or it does not exist yet.
	Gang client.Object
	// SecretProblems name the required Secrets of the user's that are missing or lack keys.
	SecretProblems []string
	// PodCreateFailures are the API server's refusals of the job's pods (podCreateFailures), and
	// PodCreateRecheck, when a child has fewer pods than it asks for, is when to look again.
	PodCreateFailures []string
	PodCreateRecheck  time.Duration
	// HeldTemplates name the worker StatefulSets and Jobs ("StatefulSet <name>", "Job <name>")
	// whose new pod template waits for the job's pods to be gone (holdChild).
	HeldTemplates []string
	// Secrets is what was verified of the generated Secrets (secrets.go).
	Secrets secretIntegrity
	// Now is when the observation was made: the time-driven steps (a restart's backoff) read
	// it, so the pass's decision stays a function of what it observed.
	Now time.Time
	// GoneWorkers are why worker pods the watch saw deleted were lost, by pod UID (gone_pods.go).
	GoneWorkers map[types.UID]troupev1.FailureReason
	// LostNodes are the lost nodes the job's pods are on, by name, and NodeRecheck how long until
	// the next node of its pods that is not Ready would be lost (lost_nodes.go).
	LostNodes   map[string]lostNode
	NodeRecheck time.Duration

	// current holds every owned child found, by kind and name.
	current map[childRef]client.Object
	// gang are the keys of the gang provider's children among the desired ones.
	gang map[childRef]bool
}

// observe reads the job's children and pods. Children come from the cache, which holds only
// objects carrying the job's labels; a child missing there is read from the API server when
// the answer matters before anything is created (readThrough), to tell a name taken by a
// foreign object (a conflict) from our own object the cache does not hold. A child of the job
// that lost its owner reference is filed to be adopted back (claim; act adopts it). observe
// writes nothing.
func (r *Reconciler) observe(ctx context.Context, job Object, s *Spec) (*Observed, error) {
	obs := &Observed{StatefulSets: map[string]*appsv1.StatefulSet{}, WorkerJobs: map[string][]*batchv1.Job{}, current: map[childRef]client.Object{},
		GoneWorkers: r.gone.of(job.GetUID()), Now: r.clock.Now(), Progress: r.progress.latest(job.GetUID())}
	ids, gang := childIdentities(s)
	obs.gang = gang
	podHolders := 0 // children that hold pods, before want in the order they are created
	for _, want := range ids {
		// The master Job of a job asking for a pause is gone, or going (decide): it is not
		// looked for beyond the cache.
		through := readThrough(job, want, podHolders == 0) && (!s.RunMode.Pause || !s.isMasterJob(want))
		cur, err := r.getChild(ctx, want, through)
		if holdsPods(want) {
			podHolders++
		}
		if err != nil {
			return nil, err
		}
		if cur == nil {
			obs.Missing = append(obs.Missing, keyOf(want))
			continue
		}
		ours, orphan, err := r.claim(ctx, job, want, cur)
		if err == nil && orphan {
			// The cache holds an object no job controls as its identity alone
			// (trimUnlessTroupes): the orphan is read whole, and claimed on what it is now.
			if cur, err = r.readLive(ctx, want); err == nil && cur != nil {
				ours, orphan, err = r.claim(ctx, job, want, cur)
			}
		}
		if err != nil {
			return nil, err
		}
		if cur == nil { // gone since
			obs.Missing = append(obs.Missing, keyOf(want))
			continue
		}
		if orphan {
			obs.Orphans = append(obs.Orphans, claimedChild{want: want, cur: cur})
		}
		if !ours {
			obs.Conflicts = append(obs.Conflicts, keyOf(want))
			continue
		}
		obs.found(want, cur)
	}

	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(s.Namespace),
		client.MatchingFields{jobUIDField: string(job.GetUID())}); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	obs.Attempt = currentAttempt(s, job.JobStatus())
	obs.setPods(pods.Items)
	lost, recheck, err := r.observeNodes(ctx, obs.Pods, obs.Now)
	if err != nil {
		return nil, err
	}
	obs.LostNodes, obs.NodeRecheck = lost, recheck
	if p := job.JobStatus().Phase; !p.Ended() {
		problems, err := r.checkSecrets(ctx, s)
		if err != nil {
			return nil, err
		}
		obs.SecretProblems = problems
		if obs.PodCreateFailures, obs.PodCreateRecheck, err = r.podCreateFailures(ctx, s, obs); err != nil {
			return nil, err
		}
		if err := r.verifyGeneratedSecrets(ctx, job, ids, obs); err != nil {
			return nil, err
		}
	} else {
		r.podCreates.forget(types.NamespacedName{Namespace: s.Namespace, Name: s.Name})
	}
	surplus, err := r.surplusWorkerJobs(ctx, job, s)
	if err != nil {
		return nil, err
	}
	obs.SurplusWorkerJobs = surplus
	if s.HasMaster() {
		obs.Verdict = masterVerdict(obs.MasterJob, obs.MasterPods)
	} else {
		obs.Verdict = workersVerdict(s, obs)
	}
	return obs, nil
}

// workersVerdict is the verdict of a job without a master: Succeeded once every worker Job it
// asks for has completed, "" before. A failed worker Job fails the job through the restart plan
// (failedWorkerJob), as it does a job with a master.
func workersVerdict(s *Spec, obs *Observed) troupev1.JobPhase {
	if len(s.WorkerSets) == 0 || s.Suspended() {
		return "" // a paused job's is cleared by decide (withoutMaster)
	}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		done := completedWorkerJobs(ws, obs)
		for _, h := range ws.WorkerHostnames() {
			if !done[h] {
				return ""
			}
		}
	}
	return troupev1.JobSucceeded
}

// completedWorkerJobs names the worker Jobs of ws that have completed in the current attempt.
func completedWorkerJobs(ws *WorkerSet, obs *Observed) map[string]bool {
	done := map[string]bool{}
	for _, j := range obs.WorkerJobs[ws.Name] {
		if c := terminalJobCondition(j); c != nil && c.Type == batchv1.JobComplete && attemptOf(j.Spec.Template.Labels) == obs.Attempt {
			done[j.Name] = true
		}
	}
	return done
}

// completedWorkers counts the pods of the worker sets that run to completion whose Jobs, of
// indexes the set still asks for, have completed in the current attempt (Plan.CompletedWorkers).
func completedWorkers(s *Spec, obs *Observed) int32 {
	var n int32
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		if !ws.RunsToCompletion {
			continue
		}
		done := completedWorkerJobs(ws, obs)
		for _, h := range ws.WorkerHostnames() {
			if done[h] {
				n++
			}
		}
	}
	return n
}

// surplusWorkerJobs are the job's worker Jobs of indexes it no longer asks for (a worker set
// that runs to completion, scaled down), found through the cache's job-UID index.
func (r *Reconciler) surplusWorkerJobs(ctx context.Context, job Object, s *Spec) ([]*batchv1.Job, error) {
	wanted := map[string]bool{}
	for i := range s.WorkerSets {
		if ws := &s.WorkerSets[i]; ws.RunsToCompletion {
			for _, h := range ws.WorkerHostnames() {
				wanted[h] = true
			}
		}
	}
	if len(wanted) == 0 {
		return nil, nil
	}
	// The cache's own objects, read and not copied: every pass reads all of a job's worker
	// Jobs (500 for a large PyTorchJob) to find the few it no longer wants, and copies those.
	var list batchv1.JobList
	if err := r.client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingFields{jobUIDField: string(job.GetUID())},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list worker Jobs: %w", err)
	}
	var out []*batchv1.Job
	for i := range list.Items {
		if j := &list.Items[i]; isWorkerJob(j) && !wanted[j.Name] && metav1.IsControlledBy(j, job) {
			out = append(out, j.DeepCopy())
		}
	}
	return out, nil
}

// childIdentities are the job's desired children, in the order of Children, as objects that
// carry no more than their type, name and namespace (the backend's and the gang's as their
// providers return them, unlabelled and unhashed), and the keys of the gang's among them.
// observe looks the children up by these; the children themselves are built once per pass,
// after the observation they depend on (ready workers, released workers, a held master), by
// syncChildren. TestChildIdentitiesAreChildren keeps the two lists alike.
func childIdentities(s *Spec) ([]client.Object, map[childRef]bool) {
	named := func(o client.Object, name string) client.Object {
		o.SetName(name)
		o.SetNamespace(s.Namespace)
		return o
	}
	ids := []client.Object{named(&corev1.Service{}, s.ServiceName())}
	if s.Backend != nil {
		for _, o := range s.Backend.Objects(s) {
			ids = append(ids, named(o, o.GetName()))
		}
	}
	gang := map[childRef]bool{}
	if s.Gang != nil {
		for _, o := range s.Gang.Objects(s) {
			ids = append(ids, named(o, o.GetName()))
			gang[keyOf(o)] = true
		}
	}
	if s.DisruptionBudgetEnabled() {
		ids = append(ids, named(&policyv1.PodDisruptionBudget{}, s.Name))
	}
	if s.NetworkPolicyEnabled() {
		ids = append(ids, named(&networkingv1.NetworkPolicy{}, s.Name))
	}
	for i := range s.WorkerSets {
		if ws := &s.WorkerSets[i]; ws.RunsToCompletion {
			for _, h := range ws.WorkerHostnames() {
				ids = append(ids, named(&batchv1.Job{}, h))
			}
		} else {
			ids = append(ids, named(&appsv1.StatefulSet{}, ws.ChildName))
		}
	}
	// The master Job is always looked up: whether it stays wanted (a pause, a restart, a master
	// held back) is decided from what is observed (decide).
	if s.HasMaster() {
		ids = append(ids, named(&batchv1.Job{}, s.Master.JobName))
	}
	return ids, gang
}

// readThrough reports whether a child missing from the cache is read from the API server
// before the pass goes on. It is, for a child that holds pods (a worker StatefulSet or Job, the
// master Job) but the first one the job creates (firstPodHolder): a foreign object with its name
// must be found before any pod of the job starts, and the first such child's own create finds it
// (createChild) before any pod exists, which saves a new job one GET. It is, for every child,
// once the job's status says its children all existed (or names a conflict): a child missing
// from the cache then was deleted, lost its labels or is still in the way, and the pass must
// know which. The same holds for a generated Secret the status has a record of: one gone would
// fail the job (secrets.go), so its absence is confirmed. A new job's other children are not
// read: they are created, and a name already taken is found by the create (createChild), after
// which nothing more is created.
func readThrough(job Object, want client.Object, firstPodHolder bool) bool {
	if c := meta.FindStatusCondition(job.JobStatus().Conditions, troupev1.ConditionInitialized); c != nil &&
		c.Reason != troupev1.ReasonCreatingChildren {
		return true
	}
	if holdsPods(want) {
		return !firstPodHolder
	}
	_, isSecret := want.(*corev1.Secret)
	return isSecret && secretRecord(job.JobStatus(), want.GetName()) != nil
}

// holdsPods: want is a child whose controller makes pods (a StatefulSet or a Job).
func holdsPods(want client.Object) bool {
	switch want.(type) {
	case *appsv1.StatefulSet, *batchv1.Job:
		return true
	}
	return false
}

// getChild returns the object named like want from the cache, or nil when the cache has none
// and live is false; with live, a miss is read from the API server.
func (r *Reconciler) getChild(ctx context.Context, want client.Object, live bool) (client.Object, error) {
	cur := emptyLike(want)
	key := client.ObjectKeyFromObject(want)
	err := r.client.Get(ctx, key, cur)
	if apierrors.IsNotFound(err) && live {
		return r.readLive(ctx, want)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", keyOf(want).Kind, key.Name, err)
	}
	return cur, nil
}

// readLive reads want's object from the API server (nil: there is none).
func (r *Reconciler) readLive(ctx context.Context, want client.Object) (client.Object, error) {
	cur := emptyLike(want)
	err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), cur)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", keyOf(want).Kind, want.GetName(), err)
	}
	return cur, nil
}

// emptyLike is an empty object to read want's kind into; a Secret is read metadata-only (the
// engine never reads a generated Secret's data back).
func emptyLike(want client.Object) client.Object {
	if _, isSecret := want.(*corev1.Secret); isSecret {
		return ownedSecret()
	}
	return reflect.New(reflect.TypeOf(want).Elem()).Interface().(client.Object)
}

// claimedChild is a child of the job's found under the name of the desired child want (cur may
// be read metadata-only, so its Go type does not name it).
type claimedChild struct {
	want, cur client.Object
}

// claim tells whose cur, the object found under the name of the desired child want, is: the
// job's own child (ours), an orphan of the job's to adopt back (ours and orphan: act adopts
// it), or someone else's (a conflict).
func (r *Reconciler) claim(ctx context.Context, job Object, want, cur client.Object) (ours, orphan bool, err error) {
	if metav1.IsControlledBy(cur, job) {
		return true, false, nil
	}
	if !adoptable(job, cur) {
		return false, false, nil
	}
	if _, isSecret := want.(*corev1.Secret); isSecret {
		if ok, err := r.adoptableSecret(ctx, job, want); err != nil || !ok {
			return false, false, err
		}
	}
	return true, true, nil
}

// isOrphan says the observation found the job's child want without its owner reference (act
// adopts it back).
func (obs *Observed) isOrphan(want client.Object) bool {
	key := keyOf(want)
	return slices.ContainsFunc(obs.Orphans, func(o claimedChild) bool { return keyOf(o.want) == key })
}

// A child whose owner reference was removed (by hand, by a tool that rewrote the object, by an
// `kubectl apply` of an exported copy) is still the job's: it carries the job's UID label, and
// no other controller claims it. Reporting it as a name
// conflict would leave the job stuck behind its own child (an orphaned master Job is never
// seen finishing; an orphaned StatefulSet is no longer kept in shape), and garbage collection
// would leave it behind when the job is deleted. So it is adopted back, as the Job and
// ReplicaSet controllers adopt orphans that match their selector. An object of anyone else
// (no label, another job's UID, another controller) is still never touched. The label alone
// proves nothing (whoever may create the object may write it): harmless for a child whose
// content the operator puts back, but not for a generated Secret, whose data it never
// rewrites; one is adopted only when its data is what the job's status records
// (adoptableSecret).

// adoptable reports whether cur is an orphan of job: no controller, and the job's UID label.
func adoptable(job Object, cur client.Object) bool {
	return metav1.GetControllerOf(cur) == nil && cur.GetLabels()[troupev1.LabelJobUID] == string(job.GetUID())
}

// found counts cur as the job's existing child want (cur may be metadata only: a Secret).
// observe calls it as it builds the observation; after adds what the pass did to a copy.
func (obs *Observed) found(want, cur client.Object) {
	key := keyOf(want)
	obs.Missing = slices.DeleteFunc(obs.Missing, func(m childRef) bool { return m == key })
	obs.current[key] = cur
	if obs.gang[key] {
		obs.Gang = cur
	}
	switch c := cur.(type) {
	case *batchv1.Job:
		if isWorkerJob(c) {
			set := c.Labels[troupev1.LabelWorkerSet]
			obs.WorkerJobs[set] = append(slices.DeleteFunc(slices.Clone(obs.WorkerJobs[set]), func(j *batchv1.Job) bool { return j.Name == c.Name }), c)
		} else {
			obs.MasterJob = c
		}
	case *appsv1.StatefulSet:
		obs.StatefulSets[c.Labels[troupev1.LabelWorkerSet]] = c
	}
}

// setPods files the job's pods: all of them, split by role and worker set, and the worker pods
// of obs.Attempt apart from the pods of other attempts.
func (obs *Observed) setPods(pods []corev1.Pod) {
	obs.Pods, obs.MasterPods, obs.StalePods = pods, nil, nil
	obs.WorkerPods, obs.AttemptWorkerPods = map[string][]*corev1.Pod{}, map[string][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		current := attemptOf(p.Labels) == obs.Attempt
		if !current {
			obs.StalePods = append(obs.StalePods, p)
		}
		switch p.Labels[troupev1.LabelRole] {
		case troupev1.RoleMaster:
			obs.MasterPods = append(obs.MasterPods, p)
		case troupev1.RoleWorker:
			set := p.Labels[troupev1.LabelWorkerSet]
			obs.WorkerPods[set] = append(obs.WorkerPods[set], p)
			if current {
				obs.AttemptWorkerPods[set] = append(obs.AttemptWorkerPods[set], p)
			}
		}
	}
}

// currentAttempt is the restart attempt the job's pods of now carry: status.restarts for a job
// with a failure policy; 0 without one, whose pods carry no attempt label (labelRestartAttempt).
func currentAttempt(s *Spec, st *troupev1.JobStatus) int32 {
	if s.RunPolicy.FailurePolicy == nil {
		return 0
	}
	return st.Restarts
}

// withoutMaster is a copy of the observation without the master Job named name (and so without
// its verdict, a master's or the workers'), for a pass that sets the master Job aside (a
// restart, restart.go; a pause, runmode.go): it is neither found nor missing.
func (obs *Observed) withoutMaster(name string) *Observed {
	c := *obs
	key := childRef{Kind: "Job", Name: name}
	c.current = maps.Clone(obs.current)
	delete(c.current, key)
	c.Missing = slices.DeleteFunc(slices.Clone(obs.Missing), func(m childRef) bool { return m == key })
	c.MasterJob, c.Verdict = nil, ""
	return &c
}

// The master's verdict is the master Job's: Complete or Failed. kube-controller-manager's Job
// controller gives it after it has counted the pod and removed the pod's tracking finalizer,
// which under load comes many seconds after the launcher exited (docs/performance.md measured
// p50 21 s with 200 launchers ending together). When the Job's success is certain before the
// Job controller writes it, the engine does not wait for it: the launcher's exit is the job's
// end, and a user waiting on the job (kubectl wait, a pipeline) should learn it then.
//
// Success is certain, for troupe's master Job (completions 1, parallelism 1, a failed pod
// replaced only once it has terminated), when
//   - the Job says SuccessCriteriaMet: the Job controller's own decision, which it turns into
//     Complete once the Job's pods have terminated; or
//   - one of the Job's pods has succeeded and none of its pods is still active. The Job
//     controller could then still fail the Job for one reason only, a deadline
//     (activeDeadlineSeconds) that passes before it syncs, since it checks the deadline before
//     it counts completions: so not for a Job with a deadline. Failures count against
//     backoffLimit and the pod failure policy before a replacement pod is made; a pod that
//     exists and succeeded means neither stopped the Job, and no pod of it can fail any more.
//
// A failure is never anticipated: the Job's FailureTarget comes while its pods may still
// terminate, and a restart (restart.go) or a user's retry must not start a launcher while the
// failed one lives, which is why the Job controller holds Failed back until then.

// masterVerdict is the master's verdict: Succeeded or Failed once it is in (above), "" while the
// master runs. A pass computes it once, when its observation is complete (Observed.Verdict).
func masterVerdict(job *batchv1.Job, masterPods []*corev1.Pod) troupev1.JobPhase {
	if c := terminalJobCondition(job); c != nil {
		if c.Type == batchv1.JobComplete {
			return troupev1.JobSucceeded
		}
		return troupev1.JobFailed
	}
	if successCertain(job, masterPods) {
		return troupev1.JobSucceeded
	}
	return ""
}

// successCertain: the master Job will be Complete, though it does not say so yet (above).
func successCertain(job *batchv1.Job, masterPods []*corev1.Pod) bool {
	if job == nil || !job.DeletionTimestamp.IsZero() || managedByOther(job) {
		return false
	}
	if jobConditionTrue(job, batchv1.JobSuccessCriteriaMet) {
		return true
	}
	if jobConditionTrue(job, batchv1.JobFailureTarget) || job.Spec.ActiveDeadlineSeconds != nil ||
		derefOne(job.Spec.Completions) != 1 || derefOne(job.Spec.Parallelism) != 1 {
		return false
	}
	succeeded := false
	for _, p := range masterPods {
		if !metav1.IsControlledBy(p, job) {
			continue
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			succeeded = true
		case corev1.PodFailed:
		default:
			return false // still active: the Job is not done with its pods
		}
	}
	return succeeded
}

// masterFinishedAt is when the master Job's succeeded pod ended: the latest finish of its
// containers, or nil when no pod of the Job says.
func masterFinishedAt(job *batchv1.Job, masterPods []*corev1.Pod) *metav1.Time {
	var at *metav1.Time
	for _, p := range masterPods {
		if job == nil || !metav1.IsControlledBy(p, job) || p.Status.Phase != corev1.PodSucceeded {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && !t.FinishedAt.IsZero() && (at == nil || at.Before(&t.FinishedAt)) {
				at = t.FinishedAt.DeepCopy()
			}
		}
	}
	return at
}

// managedByOther: the Job's spec.managedBy gives it to a controller other than the Job
// controller, whose rules the engine does not know.
func managedByOther(job *batchv1.Job) bool {
	return job.Spec.ManagedBy != nil && *job.Spec.ManagedBy != batchv1.JobControllerName
}

func jobConditionTrue(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// derefOne is a Job's completions or parallelism, both 1 when unset.
func derefOne(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func terminalJobCondition(job *batchv1.Job) *batchv1.JobCondition {
	if job == nil {
		return nil
	}
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// jobHasLivePods reports whether any pod of the job is pending or running, or a worker
// StatefulSet counts pods the cache has not shown yet.
func jobHasLivePods(obs *Observed) bool {
	for i := range obs.Pods {
		if p := &obs.Pods[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return true
		}
	}
	for _, sts := range obs.StatefulSets {
		if sts.Status.Replicas > 0 {
			return true
		}
	}
	for _, jobs := range obs.WorkerJobs {
		for _, j := range jobs {
			if j.Status.Active > 0 {
				return true
			}
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// A pod the API server refuses (a ResourceQuota, Pod Security admission, a LimitRange) is
// reported by the Job or StatefulSet controller only as a FailedCreate event on the child; no
// condition of the child says it. The engine reads those events while a child has fewer pods
// than it wants, and puts the API server's message on the job (ReplicaFailure, reason
// FailedCreate, as a ReplicaSet reports it), so `kubectl get`/`describe` of the job says why
// it does not start.

// +kubebuilder:rbac:groups="",resources=events,verbs=list

// childrenLackingPods are the job's StatefulSets and Jobs that have fewer pods than they ask
// for, once their controller has synced them (childSynced): a worker StatefulSet whose status
// counts fewer pods than its replicas and whose pods the cache holds fewer of too (the
// controller counts a pod it created only on its next sync, which on a busy cluster comes
// tens of seconds later), a worker Job that is neither suspended nor finished and counts no
// pod, a master Job that is neither suspended nor finished and has no pod.
func childrenLackingPods(obs *Observed) []client.Object {
	var out []client.Object
	for _, name := range slices.Sorted(maps.Keys(obs.StatefulSets)) {
		sts := obs.StatefulSets[name]
		want := ptr.Deref(sts.Spec.Replicas, 1)
		if childSynced(sts) && sts.Status.Replicas < want && len(obs.WorkerPods[name]) < int(want) {
			out = append(out, sts)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(obs.WorkerJobs)) {
		for _, j := range obs.WorkerJobs[name] {
			if childSynced(j) && !ptr.Deref(j.Spec.Suspend, false) && terminalJobCondition(j) == nil && j.Status.Active+j.Status.Succeeded == 0 {
				out = append(out, j)
			}
		}
	}
	if j := obs.MasterJob; j != nil && childSynced(j) && !ptr.Deref(j.Spec.Suspend, false) && terminalJobCondition(j) == nil && !hasLivePod(obs.MasterPods) {
		out = append(out, j)
	}
	return out
}

// childSynced says the child's controller has synced it as it is now, so a pod it lacks was
// tried: the StatefulSet controller writes the generation it synced (observedGeneration) on
// every sync, also one whose creates were refused; the Job controller writes a Job's ready
// count (and its start time) on its first. Before that no refusal can have been recorded, and
// on a busy cluster that lasts: at Kubernetes' default client rates kube-controller-manager
// reached 200 new jobs' StatefulSets 56 s after their creation at the median, and looking for
// refusals meanwhile cost each job 1-2 passes (docs/performance.md).
func childSynced(child client.Object) bool {
	switch c := child.(type) {
	case *appsv1.StatefulSet:
		return c.Status.ObservedGeneration >= c.Generation
	case *batchv1.Job:
		return c.Status.Ready != nil || c.Status.StartTime != nil
	}
	return true
}

// podHostname is a job pod's hostname: a StatefulSet's pod is named so; a Job's pod
// (<job>-<suffix>) has it in its spec, set by the engine.
func podHostname(p *corev1.Pod) string {
	if p.Spec.Hostname != "" {
		return p.Spec.Hostname
	}
	return p.Name
}

// hasLivePod says some of pods is not being deleted.
func hasLivePod(pods []*corev1.Pod) bool {
	return slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return p.DeletionTimestamp.IsZero() })
}

// podCreateFailures returns, for each child that lacks pods, the newest FailedCreate message
// its controller recorded, as "<Kind> <name>: <message>", looked up as podCreatePace allows (no
// watch tells when a controller records one: events are not watched, as a tenant could grow the
// operator's memory with them); recheck is when to look again, 0 when no child lacks pods.
func (r *Reconciler) podCreateFailures(ctx context.Context, s *Spec, obs *Observed) (failures []string, recheck time.Duration, err error) {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	children := childrenLackingPods(obs)
	if len(children) == 0 {
		r.podCreates.forget(key)
		return nil, 0, nil
	}
	now := r.clock.Now()
	look, found, wait := r.podCreates.due(key, s.Owner.UID, now)
	if !look {
		return found, wait, nil
	}
	// The namespace's FailedCreate events, one LIST shared by all its jobs (failedCreateEvents),
	// matched to the children here: a large PyTorchJob has thousands of worker Jobs.
	newest, answered, err := r.podCreates.events.newestByObject(ctx, r.apiReader, s.Namespace, now)
	if err != nil {
		return nil, 0, fmt.Errorf("FailedCreate events of %s: %w", s.Name, err)
	}
	if !answered { // another job's first LIST of the namespace is in flight
		return found, failedCreateListPending, nil
	}
	for _, child := range children {
		if msg, ok := newest[child.GetUID()]; ok {
			failures = append(failures, fmt.Sprintf("%s %s: %s", keyOf(child).Kind, child.GetName(), msg))
		}
	}
	r.podCreates.events.forgetIdle(now)
	return failures, r.podCreates.looked(key, now, failures), nil
}

// withPodCreateFailures is the ReplicaFailure condition: refused pods come first, since a job
// whose pods cannot be created will not start at all; otherwise the failed pods' condition.
func withPodCreateFailures(obs *Observed, failedPods metav1.Condition) metav1.Condition {
	if len(obs.PodCreateFailures) == 0 {
		return failedPods
	}
	return newCondition(troupev1.ConditionReplicaFailure, true, troupev1.ReasonFailedCreate,
		"the API server refused pods: "+strings.Join(obs.PodCreateFailures, "; "))
}

// attemptOf reads a restart attempt label; a pod without one is of attempt 0.
func attemptOf(labels map[string]string) int32 {
	n, err := strconv.ParseInt(labels[troupev1.LabelRestartAttempt], 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// ReadyWorkers lists, per worker set, the hostnames of its pods that are Ready, in ordinal
// order (the value of Plan.ReadyWorkers).
func readyWorkers(s *Spec, obs *Observed) map[string][]string {
	out := map[string][]string{}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		ready := map[string]bool{}
		for _, p := range obs.WorkerPods[ws.Name] {
			if p.DeletionTimestamp.IsZero() && podReady(p) {
				ready[podHostname(p)] = true
			}
		}
		for _, h := range ws.WorkerHostnames() {
			if ready[h] {
				out[ws.Name] = append(out[ws.Name], h)
			}
		}
	}
	return out
}

// liveMasterPods are the master's pods that are not being deleted (clean-pod policy All deletes
// them).
func liveMasterPods(obs *Observed) []*corev1.Pod {
	return slices.DeleteFunc(slices.Clone(obs.MasterPods), func(p *corev1.Pod) bool { return !p.DeletionTimestamp.IsZero() })
}

// liveMasterJob is the observed master Job unless it is being deleted: what planPause reads.
func liveMasterJob(obs *Observed) *batchv1.Job {
	if j := obs.MasterJob; j != nil && j.DeletionTimestamp.IsZero() {
		return j
	}
	return nil
}

// podEnded: the pod has run its course or is on its way out.
func podEnded(pod *corev1.Pod) bool {
	return !pod.DeletionTimestamp.IsZero() || podTerminal(pod)
}

// podTerminal says the pod's phase is Succeeded or Failed: it runs no more.
func podTerminal(pod *corev1.Pod) bool { return terminalPhase(pod.Status.Phase) }

// terminalPhase: Succeeded or Failed.
func terminalPhase(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}

// verifyGeneratedSecrets compares each generated Secret of the job with its record in the
// job's status. A Secret without a record is not the operator's (Reconciler.recordSecret): it is
// reported like a modified one.
// ids are the job's desired children (childIdentities).
func (r *Reconciler) verifyGeneratedSecrets(ctx context.Context, job Object, ids []client.Object, obs *Observed) error {
	obs.Secrets.checked = true
	prev := job.JobStatus()
	started := prev.StartTime != nil || jobHasLivePods(obs)
	for _, want := range ids {
		if _, ok := want.(*corev1.Secret); !ok {
			continue
		}
		name := want.GetName()
		rec := secretRecord(prev, name)
		cur, exists := obs.current[keyOf(want)]
		if exists && rec != nil && rec.ResourceVersion == cur.GetResourceVersion() {
			obs.Secrets.Records = append(obs.Secrets.Records, *rec)
			r.secretVersions.recorded(job, name)
			continue
		}
		if exists && rec != nil && r.secretVersions.verified(job, name) == cur.GetResourceVersion() {
			verified := *rec // the status does not record its resourceVersion yet (progressOnly)
			verified.ResourceVersion = cur.GetResourceVersion()
			obs.Secrets.Records = append(obs.Secrets.Records, verified)
			continue
		}
		var fresh corev1.Secret
		if exists {
			err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), &fresh)
			if client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("get Secret %s: %w", name, err)
			}
			exists = err == nil && (metav1.IsControlledBy(&fresh, job) || obs.isOrphan(want)) // act adopts an orphan
		}
		switch {
		case !exists && rec != nil && started && !slices.Contains(obs.Conflicts, keyOf(want)):
			obs.Secrets.Lost = append(obs.Secrets.Lost, name)
			obs.Secrets.Records = append(obs.Secrets.Records, *rec)
		case !exists:
			// Not created yet, or deleted before any pod got its keys: it is generated (again).
		case rec == nil:
			obs.Secrets.Tampered = append(obs.Secrets.Tampered, name)
		case rec.SHA256 == secretDataHash(fresh.Data):
			obs.Secrets.Records = append(obs.Secrets.Records, troupev1.GeneratedSecretRecord{
				Name: name, SHA256: secretDataHash(fresh.Data), ResourceVersion: fresh.ResourceVersion,
			})
			r.secretVersions.note(job, &fresh)
		default:
			obs.Secrets.Tampered = append(obs.Secrets.Tampered, name)
			obs.Secrets.Records = append(obs.Secrets.Records, *rec)
		}
	}
	return nil
}

// observeNodes finds the lost nodes among those the job's pods (not yet ended) are on, and how
// long until the next of the others that are not Ready would be lost, or the taint manager's
// turn on a node marked out of service ends (0: none).
func (r *Reconciler) observeNodes(ctx context.Context, pods []corev1.Pod, now time.Time) (map[string]lostNode, time.Duration, error) {
	if r.lostNodes.Timeout <= 0 {
		return nil, 0, nil
	}
	var lost map[string]lostNode
	var recheck time.Duration
	seen := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || seen[p.Spec.NodeName] || podTerminal(p) {
			continue
		}
		seen[p.Spec.NodeName] = true
		var node corev1.Node
		err := r.client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node)
		var l lostNode
		isLost, wait := false, time.Duration(0)
		switch {
		case apierrors.IsNotFound(err):
			l, isLost = lostNode{Name: p.Spec.NodeName, Why: "its Node object is gone", Removable: true}, true
		case err != nil:
			return nil, 0, fmt.Errorf("get node %s: %w", p.Spec.NodeName, err)
		default:
			l, isLost, wait = nodeLoss(&node, r.lostNodes, now)
			if !outOfService(&node) {
				r.outOfService.back(node.Name)
			} else if left := r.outOfService.since(node.Name, now).Add(taintEvictionGrace).Sub(now); taintEvicts(&node) && left > 0 {
				l.TaintEvicting, wait = true, left
			}
		}
		if isLost {
			if lost == nil {
				lost = map[string]lostNode{}
			}
			lost[l.Name] = l
		}
		if wait > 0 && (recheck == 0 || wait < recheck) {
			recheck = wait
		}
	}
	return lost, recheck, nil
}

// onLostNode is the lost node pod p is on, if it is on one and has not ended.
func (obs *Observed) onLostNode(p *corev1.Pod) (lostNode, bool) {
	if podTerminal(p) {
		return lostNode{}, false
	}
	l, ok := obs.LostNodes[p.Spec.NodeName]
	return l, ok
}
