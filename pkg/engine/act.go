package engine

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// actResult is what the act step (syncChildren) did to the job's children, which the report reads
// together with the observation (Observed.after): the observation itself is not changed.
type actResult struct {
	// Created are the children the pass created, in creation order, as the API server returned
	// them, so that the status the creating pass writes says they exist (Initialized, the start
	// time) instead of costing a second status write when the watch brings them in.
	Created []client.Object
	// Claimed are the job's own children a create found under their name (the cache had not
	// brought them in yet).
	Claimed []claimedChild
	// Adopted are the orphans the observation found (Observed.Orphans) with their owner
	// reference given back, as the API server returned them.
	Adopted []claimedChild
	// Conflicts are children whose name a create found taken by an object the job does not own.
	Conflicts []childRef
	// HeldTemplates name the worker StatefulSets and Jobs ("StatefulSet <name>", "Job <name>")
	// whose new pod template waits for the job's pods to be gone (holdChild).
	HeldTemplates []string
	// Expired: the job was deleted, past its ttlSecondsAfterFinished; nothing more is done.
	Expired bool
	// Status is the job's status as the pass wrote it before creating a generated Secret
	// (the secretRecorder), nil if it did not: the report's previous status.
	Status *troupev1.JobStatus
}

// createdRefs names the created children, in creation order.
func (a *actResult) createdRefs() []childRef {
	refs := make([]childRef, 0, len(a.Created))
	for _, o := range a.Created {
		refs = append(refs, keyOf(o))
	}
	return refs
}

// secretRecorder writes the job's status with the record of a generated Secret before the
// Secret is created, from the observation as the pass has left it so far and the status before
// (Reconciler.recordSecret, which the pass hands to act: the report writes every status), and
// returns the status written.
type secretRecorder func(obs *Observed, prev *troupev1.JobStatus, secret *corev1.Secret) (*troupev1.JobStatus, error)

// act carries out the decision d (decide; s carries its plan): first the writes it calls for
// before any child changes (carryOut); then a finished job past its TTL is deleted; else
// missing children are created and owned ones put back in shape (syncChildren), and children
// the spec no longer asks for are deleted. It returns what it did, also when it fails part way.
func (r *Reconciler) act(ctx context.Context, job Object, s *Spec, d decision, prev *troupev1.JobStatus, record secretRecorder) (actResult, error) {
	if err := r.carryOut(ctx, job, d); err != nil {
		return actResult{}, err
	}
	obs := d.obs
	// Orphans first: a job that expires now takes them with it (garbage collection).
	adopted, err := r.adoptOrphans(ctx, job, s, obs.Orphans)
	if err != nil {
		return actResult{Adopted: adopted}, err
	}
	if s.Plan.Expired {
		return actResult{Adopted: adopted, Expired: true}, r.deleteExpired(ctx, job, s)
	}
	// Claims before the pods that mount them; a claim of the name that is not the job's stops
	// the pass as any conflict does.
	if !s.Plan.Ended() {
		conflicts, err := r.ensureClaims(ctx, s)
		if err != nil || len(conflicts) > 0 {
			return actResult{Adopted: adopted, Conflicts: conflicts}, err
		}
	}
	acted, err := r.syncChildren(ctx, job, s, d, prev, adopted, record)
	acted.Adopted = adopted
	r.recordCreated(job, acted.createdRefs()) // told even when a later create failed
	if err != nil {
		return acted, err
	}
	// Turning the budget off is how a user lets a drain evict the workers of a running job;
	// runPolicy.networkPolicy.enabled set to false on a running job removes its policy.
	if !s.DisruptionBudgetEnabled() {
		if err := r.deleteUnwanted(ctx, job, s, &policyv1.PodDisruptionBudget{}); err != nil {
			return acted, err
		}
	}
	if !s.NetworkPolicyEnabled() {
		if err := r.deleteUnwanted(ctx, job, s, &networkingv1.NetworkPolicy{}); err != nil {
			return acted, err
		}
	}
	return acted, nil
}

// carryOut makes the writes a pass's decision calls for before any child is created or updated
// (decide): a failed job's launcher suspended; a failed worker Job a rule ignores and those of
// indexes scaled away deleted; the master Job of an earlier attempt or of a pausing job, the
// master pods of earlier attempts, of a paused job and of an ended one whose clean-pod policy is
// All deleted; pods on lost nodes deleted at once, each told in an event. Deletes carry the
// object's UID, so that a namesake created since is not deleted.
func (r *Reconciler) carryOut(ctx context.Context, job Object, d decision) error {
	if j := d.suspendLauncher; j != nil {
		stopped := j.DeepCopy() // the observation keeps the Job as observed
		stopped.Spec.Suspend = ptr.To(true)
		if err := r.client.Patch(ctx, stopped, client.MergeFrom(j)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("suspend Job %s of the failed job: %w", j.Name, err)
		}
	}
	for _, j := range d.deleteWorkerJobs {
		if err := r.deleteWorkerJob(ctx, j); err != nil {
			return err
		}
	}
	if j := d.deleteMasterJob; j != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("deleting the master Job", "job", j.Name, "why", d.deleteMasterWhy)
		if err := r.client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &j.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete Job %s (%s): %w", j.Name, d.deleteMasterWhy, err)
		}
	}
	if err := r.deletePods(ctx, d.deletePods); err != nil {
		return err
	}
	return r.removePods(ctx, job, d.obs, d.removePods)
}

// removePods deletes pods on lost nodes at once (grace period 0: no kubelet answers), each by
// its UID, and tells each in a NodeLost event.
func (r *Reconciler) removePods(ctx context.Context, job Object, obs *Observed, pods []*corev1.Pod) error {
	for _, p := range pods {
		err := r.client.Delete(ctx, p, client.GracePeriodSeconds(0), client.Preconditions{UID: &p.UID})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue // gone, or another pod of the name
		}
		if err != nil {
			return fmt.Errorf("delete pod %s on a lost node: %w", p.Name, err)
		}
		l, _ := obs.onLostNode(p)
		r.recorder.Eventf(job, p, corev1.EventTypeWarning, troupev1.EventNodeLost, "Delete", "%s", nodeLostNote(p, l))
	}
	return nil
}

// deleteExpired deletes a finished job whose ttlSecondsAfterFinished has passed (Plan.Expired);
// its children go with it through garbage collection. The TTLExpired event is told once the
// delete succeeded: a failed delete is retried, and telling it before would tell it again on
// every retry.
func (r *Reconciler) deleteExpired(ctx context.Context, job Object, s *Spec) error {
	ttl := *s.RunPolicy.TTLSecondsAfterFinished
	ctrl.LoggerFrom(ctx).V(2).Info("deleting finished job past its TTL", "ttlSecondsAfterFinished", ttl)
	if err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		// Not found: deleted by someone else meanwhile, which is not the TTL's doing.
		return client.IgnoreNotFound(err)
	}
	r.recorder.Eventf(job, nil, corev1.EventTypeNormal, troupev1.EventTTLExpired, "Delete",
		"deleting the job %ds after it finished (runPolicy.ttlSecondsAfterFinished)", ttl)
	return nil
}

// syncChildren creates the missing children among the desired ones (decision.children) and
// puts owned ones back in shape, and returns what it did (also when it fails part way, so that
// what was created is told). It creates nothing when the plan holds creation back
// (HoldCreates) or once a create finds a name taken by someone else. Objects it does not own
// are never touched.
func (r *Reconciler) syncChildren(ctx context.Context, job Object, s *Spec, d decision, prev *troupev1.JobStatus, adopted []claimedChild,
	record secretRecorder) (actResult, error) {
	obs := d.obs
	acted := actResult{HeldTemplates: slices.Clone(d.heldTemplates)}
	// The status so far, with the record of the Secret about to be created, is written before it.
	beforeSecret := func(secret *corev1.Secret) error {
		before := prev
		if acted.Status != nil {
			before = acted.Status
		}
		written, err := record(obs.after(acted), before, secret)
		if err != nil {
			return err
		}
		acted.Status = written
		return nil
	}
	for _, want := range d.children {
		cur, exists := obs.current[keyOf(want)]
		for _, a := range adopted {
			if keyOf(a.want) == keyOf(want) {
				cur = a.cur // its resourceVersion is the adoption's
			}
		}
		if !exists {
			if s.Plan.HoldCreates || len(acted.Conflicts) > 0 {
				continue
			}
			made, taken, conflict, err := r.createMissing(ctx, job, s, want, acted.Status != nil, beforeSecret)
			switch {
			case err != nil:
				return acted, err
			case made:
				acted.Created = append(acted.Created, want)
				if s.isMasterJob(want) && s.masterRestartOverridden() {
					retries := "each retry is a new pod"
					if s.masterRestartsInPlace() {
						retries = "its containers restart in place for the other exit codes (container restart rules), up to the Job's backoffLimit"
					}
					r.recorder.Eventf(job, want, corev1.EventTypeWarning, troupev1.EventRestartPolicyOverridden, "Create",
						"the master's template says restartPolicy OnFailure; Job %s runs its pods with Never because runPolicy.failurePolicy.rules "+
							"act on its exit codes (a pod failure policy needs pods not restarted in place); %s",
						want.GetName(), retries)
				}
				continue
			case conflict:
				acted.Conflicts = append(acted.Conflicts, keyOf(want))
				continue
			case taken == nil:
				continue
			}
			acted.Claimed = append(acted.Claimed, claimedChild{want: want, cur: taken})
			cur = taken // the job's own child, which the cache had not brought in
			// Held as decide holds a child it observed (holdChild).
			h := holdChild(s, obs, want, cur)
			if h.replace != nil {
				if err := r.deleteWorkerJob(ctx, h.replace); err != nil {
					return acted, err
				}
				continue
			}
			if h.held != "" {
				acted.HeldTemplates = append(acted.HeldTemplates, h.held)
			}
			if h.leave {
				continue
			}
		}
		if sts, ok := want.(*appsv1.StatefulSet); ok {
			r.warnScaledOutside(job, s, cur.(*appsv1.StatefulSet), sts)
		}
		var before client.Object // the patch base of a child the cache holds in part
		if heldInPart(cur) {
			before = cur
		}
		if rewritesUnheld(cur, want) {
			// What is rewritten the cache does not hold: the child is read whole and updated.
			live := emptyLike(want)
			if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), live); err != nil {
				return acted, fmt.Errorf("read %s %s to rewrite its template: %w", keyOf(want).Kind, want.GetName(), err)
			}
			cur, before = live, nil
		}
		cur = cur.DeepCopyObject().(client.Object) // put back in shape apart from the observation
		changed := restore(cur, want)
		if obs.gang[keyOf(want)] {
			changed = s.Gang.Restore(cur, want) || changed
		}
		if !changed {
			continue
		}
		if err := r.write(ctx, before, cur); err != nil {
			return acted, fmt.Errorf("update %s %s: %w", keyOf(want).Kind, want.GetName(), err)
		}
	}
	return acted, nil
}

// adoptOrphans gives each orphan of the job's the observation found its controller reference
// back, on a copy (the observation keeps the object as observed), and returns the copies as the
// API server returned them. The patch carries the orphan's resourceVersion, so an object changed
// meanwhile is not adopted from a stale read: the conflict error makes the pass run again on
// fresh data.
func (r *Reconciler) adoptOrphans(ctx context.Context, job Object, s *Spec, orphans []claimedChild) ([]claimedChild, error) {
	var adopted []claimedChild
	for _, o := range orphans {
		cur := o.cur.DeepCopyObject().(client.Object)
		cur.SetOwnerReferences(append(cur.GetOwnerReferences(), s.Owner))
		k := keyOf(o.want) // cur may be metadata only (a Secret)
		if err := r.client.Patch(ctx, cur, client.MergeFromWithOptions(o.cur, client.MergeFromWithOptimisticLock{})); err != nil {
			return adopted, fmt.Errorf("adopt %s %s: %w", k.Kind, k.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("adopted a child that had lost its owner reference", "kind", k.Kind, "name", k.Name)
		r.recorder.Eventf(job, cur, corev1.EventTypeNormal, troupev1.EventAdopted, "Adopt",
			"adopted %s %s: it carries this job's UID label but had lost its owner reference", k.Kind, k.Name)
		adopted = append(adopted, claimedChild{want: o.want, cur: cur})
	}
	return adopted, nil
}

// createMissing creates the missing child want, unless (for the master Job) the cache's copy of
// the job is not the latest. It reports whether it created want, the job's own child when
// want's name turned out to be taken by it, and whether the name is someone else's.
// jobConfirmed says whether a write of the job earlier in the pass (its status before a
// generated Secret, made with the resourceVersion of the cached copy) proved that copy the
// latest. beforeSecret writes the status before a generated Secret is created.
func (r *Reconciler) createMissing(ctx context.Context, job Object, s *Spec, want client.Object, jobConfirmed bool,
	beforeSecret func(*corev1.Secret) error) (bool, client.Object, bool, error) {
	if _, isMaster := want.(*batchv1.Job); isMaster && (!jobConfirmed || job.JobStatus().Phase.Ended()) {
		ok, err := r.masterCreationAllowed(ctx, job)
		if err != nil {
			return false, nil, false, err
		}
		if !ok {
			ctrl.LoggerFrom(ctx).V(2).Info("not creating the master Job: the cached job is not the latest")
			return false, nil, false, nil
		}
	}
	if g, ok := s.Backend.(Generator); ok {
		if err := g.Generate(s, want); err != nil {
			return false, nil, false, err
		}
	}
	secret, isSecret := want.(*corev1.Secret)
	if isSecret {
		if err := beforeSecret(secret); err != nil {
			return false, nil, false, err
		}
	}
	made, taken, conflict, err := r.createChild(ctx, job, s, want)
	if made && isSecret {
		r.secretVersions.note(job, secret)
	}
	return made, taken, conflict, err
}

// createChild creates want. When its name is taken (a child readThrough did not read: the
// job's own, which the cache had not brought in yet, or a foreign object), the object is read
// from the API server and claimed; the child it returns then is the job's to keep in shape,
// and conflict says the name is someone else's, after which the pass creates nothing.
func (r *Reconciler) createChild(ctx context.Context, job Object, s *Spec, want client.Object) (created bool, cur client.Object, conflict bool, err error) {
	err = r.client.Create(ctx, want)
	if err == nil {
		return true, nil, false, nil
	}
	k := keyOf(want)
	if !apierrors.IsAlreadyExists(err) {
		return false, nil, false, createError(k, err)
	}
	taken := emptyLike(want)
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), taken); err != nil {
		// Deleted since, or unreadable: the next pass finds out.
		return false, nil, false, fmt.Errorf("create %s %s: the name is taken, and reading it failed: %w", k.Kind, k.Name, err)
	}
	ours, orphan, err := r.claim(ctx, job, want, taken)
	switch {
	case err != nil:
		return false, nil, false, err
	case !ours:
		return false, nil, true, nil
	case orphan:
		adopted, err := r.adoptOrphans(ctx, job, s, []claimedChild{{want: want, cur: taken}})
		if err != nil {
			return false, nil, false, err
		}
		taken = adopted[0].cur
	}
	return false, taken, false, nil
}

// masterCreationAllowed re-reads the job from the API server before the master Job is created,
// and allows it only when the cache's copy is the latest (unless a write of the job earlier in
// the pass proved it: createMissing). The master Job runs the training: a
// cache that lags behind (a job whose status already says it finished, whose master Job was
// then deleted) must never start it again. When the copies differ, the watch event of the
// newer version is on its way and reconciles again.
func (r *Reconciler) masterCreationAllowed(ctx context.Context, job Object) (bool, error) {
	fresh := r.adapter.NewObject()
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(job), fresh); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return false, nil
		}
		return false, fmt.Errorf("re-read the job before creating its master: %w", err)
	}
	if fresh.GetUID() != job.GetUID() || fresh.GetResourceVersion() != job.GetResourceVersion() {
		return false, nil
	}
	return !fresh.JobStatus().Phase.Ended(), nil
}

// after is a copy of the observation as the pass left the children (acted): what it created or
// claimed counts as existing, the conflicts its creates found are named, the Secrets it
// generated are recorded, and the held templates are known. The report computes the status
// from it.
func (obs *Observed) after(acted actResult) *Observed {
	c := *obs
	c.current = maps.Clone(obs.current)
	c.StatefulSets = maps.Clone(obs.StatefulSets)
	c.WorkerJobs = maps.Clone(obs.WorkerJobs)
	c.Missing = slices.Clone(obs.Missing)
	c.Conflicts = append(slices.Clone(obs.Conflicts), acted.Conflicts...)
	c.HeldTemplates = acted.HeldTemplates
	c.Secrets.Records = slices.Clone(obs.Secrets.Records)
	for _, o := range acted.Created {
		c.found(o, o)
	}
	for _, cl := range slices.Concat(acted.Claimed, acted.Adopted) {
		c.found(cl.want, cl.cur)
	}
	for _, o := range acted.Created {
		c.Secrets.created(o)
	}
	return &c
}

// heldInPart says the cache holds less of a child than the API server does: a Secret (its
// metadata), a Job or StatefulSet (what the engine reads of its template: trimJob,
// trimStatefulSet), a ConfigMap (its values' hashes: trimConfigMap). It is patched with what the
// engine changed, never updated whole (unless read whole first: rewritesUnheld).
func heldInPart(cur client.Object) bool {
	switch cur.(type) {
	case *metav1.PartialObjectMetadata, *batchv1.Job, *appsv1.StatefulSet, *corev1.ConfigMap:
		return true
	}
	return false
}

// rewritesUnheld says restoring cur to want rewrites a part of it the cache does not hold, which
// a patch from the cached form cannot write exactly: a StatefulSet's pod template (a merge patch
// would keep whatever of the old template the new one leaves out). Such a child is read whole
// first; it happens when a job's template changes (a spec edit, a queue's placement on resume),
// not on the passes of a running job.
func rewritesUnheld(cur, want client.Object) bool {
	c, isSTS := cur.(*appsv1.StatefulSet)
	return isSTS && templateChanged(c, want)
}

// deleteWorkerJob deletes a worker Job, by its UID, in the foreground: the Job stays, being
// deleted, until its pod is gone, so that a pod of the Job that replaces it never shares a
// hostname with it.
func (r *Reconciler) deleteWorkerJob(ctx context.Context, j *batchv1.Job) error {
	if !j.DeletionTimestamp.IsZero() {
		return nil
	}
	err := r.client.Delete(ctx, j, client.Preconditions{UID: &j.UID}, client.PropagationPolicy(metav1.DeletePropagationForeground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete worker Job %s: %w", j.Name, err)
	}
	return nil
}

// ScaleHintReplicas is the placeholder of a WorkerSet's ScaleHint replaced by the replica
// count the user asked for.
const ScaleHintReplicas = "{replicas}"

// scaledOutside tells whether a worker StatefulSet's replicas were changed by someone else
// (`kubectl scale statefulset`): the spec hash it carries is the one of what the engine wants
// now, so the engine's last write already had the wanted count, yet the count differs. When
// the engine itself changes the count (the job was scaled, suspended or ended) the hash
// differs too, so its own changes are never mistaken for another's.
func scaledOutside(cur, want *appsv1.StatefulSet) bool {
	return cur.Annotations[troupev1.AnnotationSpecHash] == want.Annotations[troupev1.AnnotationSpecHash] &&
		ptr.Deref(cur.Spec.Replicas, 1) != ptr.Deref(want.Spec.Replicas, 1)
}

// warnScaledOutside records a Warning on the job when a worker StatefulSet was scaled
// directly. The job's spec is the one source of the worker count (the hostfile, the exec Role
// and the gang follow it), so the engine puts the count back and says how to scale the job.
func (r *Reconciler) warnScaledOutside(job Object, s *Spec, cur, want *appsv1.StatefulSet) {
	if !scaledOutside(cur, want) {
		return
	}
	asked := ptr.Deref(cur.Spec.Replicas, 1)
	msg := fmt.Sprintf("StatefulSet %s was scaled to %d outside the job; troupe restored the job's %d replicas",
		cur.Name, asked, ptr.Deref(want.Spec.Replicas, 1))
	for i := range s.WorkerSets {
		if ws := &s.WorkerSets[i]; ws.ChildName == cur.Name && ws.ScaleHint != "" {
			msg += ". To change the worker count, scale the job: " +
				strings.ReplaceAll(ws.ScaleHint, ScaleHintReplicas, strconv.Itoa(int(asked)))
		}
	}
	r.recorder.Eventf(job, nil, corev1.EventTypeWarning, troupev1.EventScaledOutsideJob, "Scale", "%s", msg)
}

// write stores the restored child cur. A child the cache holds in part (heldInPart; before is
// its state as read) is patched with what changed, from the version read (a conflict runs the
// pass again, as an update's would): an update would write the parts the cache does not hold
// as empty.
func (r *Reconciler) write(ctx context.Context, before, cur client.Object) error {
	if before != nil {
		return r.client.Patch(ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}
	return r.client.Update(ctx, cur)
}

// restore puts the fields of an owned child that the engine manages back to their desired
// values and reports whether it changed anything. Fields the API server cannot change on a
// live object (a Job's template but for its scheduling directives while suspended, a
// StatefulSet's selector) are left alone; the pod template of a StatefulSet is rewritten only
// when its hash differs from the wanted one (and holdTemplate did not hold it back while pods
// run), so defaults filled in by the API server never cause a write.
func restore(cur, want client.Object) bool {
	wantHash := want.GetAnnotations()[troupev1.AnnotationSpecHash]
	specChanged := cur.GetAnnotations()[troupev1.AnnotationSpecHash] != wantHash
	changed := false

	labels := cur.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range want.GetLabels() {
		if labels[k] != v {
			labels[k] = v
			changed = true
		}
	}
	cur.SetLabels(labels)

	if restoreSpec := restoreSpecOf(want); restoreSpec != nil {
		changed = restoreSpec(cur, want) || changed
	}

	if specChanged {
		ann := cur.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[troupev1.AnnotationSpecHash] = wantHash
		cur.SetAnnotations(ann)
		changed = true
	}
	return changed
}

// deleteUnwanted deletes a child the job may do without (its PodDisruptionBudget, its
// NetworkPolicy: both named like the job) once the job no longer asks for it. obj is an empty
// object of the child's type; an object of that name the job does not control is left alone.
func (r *Reconciler) deleteUnwanted(ctx context.Context, job Object, s *Spec, obj client.Object) error {
	err := r.client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, obj)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, job) || !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if err := r.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s %s: %w", reflect.TypeOf(obj).Elem().Name(), obj.GetName(), err)
	}
	return nil
}

// deletePods deletes pods of the job's master (for a restart, a pause or the clean-pod policy
// All), each by its UID.
func (r *Reconciler) deletePods(ctx context.Context, pods []*corev1.Pod) error {
	for _, p := range pods {
		if err := r.client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete master pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// createdNoteLimit bounds the Created event's message: the events API refuses a note over
// 1 kB, and a job's children are named after it (up to 63 characters each, and the kinds).
const createdNoteLimit = 900

// recordCreated tells, in one event, which children a pass created (none: no event). A new
// job's children are all created in its first pass: one event instead of one per child, each
// of which was a request under the operator's client rate limit that slowed the creation of
// every other job's children (docs/performance.md). The message names them in creation order.
func (r *Reconciler) recordCreated(job Object, created []childRef) {
	if len(created) == 0 {
		return
	}
	r.recorder.Eventf(job, nil, corev1.EventTypeNormal, troupev1.EventCreated, "Create", "%s", createdNote(created))
}

// createdNote is "created Service a, ConfigMap b, ...", cut short ("and N more") where the
// next name would take it past createdNoteLimit.
func createdNote(created []childRef) string {
	note := "created " + created[0].String()
	for i := 1; i < len(created); i++ {
		next := note + ", " + created[i].String()
		room := createdNoteLimit
		if rest := len(created) - i - 1; rest > 0 {
			room -= len(fmt.Sprintf(" and %d more", rest))
		}
		if len(next) > room {
			return fmt.Sprintf("%s and %d more", note, len(created)-i)
		}
		note = next
	}
	return note
}

// nodeLostNote is the event note of a pod deleted at once because its node is lost.
func nodeLostNote(p *corev1.Pod, l lostNode) string {
	return fmt.Sprintf("deleted pod %s at once (grace period 0): %s", p.Name, l)
}
