package engine

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// keyOf identifies a child by Go type and name (names are unique per kind in a namespace).
func keyOf(o client.Object) ChildRef {
	return ChildRef{Kind: reflect.TypeOf(o).Elem().Name(), Name: o.GetName()}
}

// childIdentities are the job's desired children, in the order of Children, as objects that
// carry no more than their type, name and namespace (the backend's and the gang's as their
// providers return them, unlabelled and unhashed), and the keys of the gang's among them.
// observe looks the children up by these; the children themselves are built once per pass,
// after the observation they depend on (ready workers, released workers, a held master), by
// syncChildren. TestChildIdentitiesAreChildren keeps the two lists alike.
func childIdentities(s *Spec) ([]client.Object, map[ChildRef]bool) {
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
	gang := map[ChildRef]bool{}
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
		ids = append(ids, named(&appsv1.StatefulSet{}, s.WorkerSets[i].StatefulSetName))
	}
	// The master Job is looked up unless the job is paused (prepareRunMode deleted it): whether
	// it stays wanted (a restart, a master held back) is decided from what is observed.
	if !s.Paused() {
		ids = append(ids, named(&batchv1.Job{}, s.Master.JobName))
	}
	return ids, gang
}

// observe reads the job's children and pods. Children come from the cache, which holds only
// objects carrying the job's labels; a child missing there is read from the API server when
// the answer matters before anything is created (readThrough), to tell a name taken by a
// foreign object (a conflict) from our own object the cache does not hold. A child of the job
// that lost its owner reference is adopted back (adopt.go).
func (r *Reconciler) observe(ctx context.Context, job Object, s *Spec) (*Observed, error) {
	obs := &Observed{StatefulSets: map[string]*appsv1.StatefulSet{}, current: map[ChildRef]client.Object{}}
	ids, gang := childIdentities(s)
	obs.gang = gang
	for _, want := range ids {
		cur, err := r.getChild(ctx, want, readThrough(job, want))
		if err != nil {
			return nil, err
		}
		if cur == nil {
			obs.Missing = append(obs.Missing, keyOf(want))
			continue
		}
		if _, err := r.claim(ctx, job, s, want, cur, obs); err != nil {
			return nil, err
		}
	}

	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(s.Namespace),
		client.MatchingFields{podJobUIDField: string(job.GetUID())}); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	obs.Pods = pods.Items
	if p := job.JobStatus().Phase; p != troupev1.JobSucceeded && p != troupev1.JobFailed {
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
	obs.Verdict = masterVerdict(obs.MasterJob, obs.Pods)
	return obs, nil
}

// readThrough reports whether a child missing from the cache is read from the API server
// before the pass goes on. It is, for a child that holds pods (a worker StatefulSet, the
// master Job): a foreign object with its name must be found before anything of the job is
// created, so that no pod starts while a conflict exists. It is, for every child, once the
// job's status says its children all existed (or names a conflict): a child missing from the
// cache then was deleted, lost its labels or is still in the way, and the pass must know which.
// The same holds for a generated Secret the status has a record of: one gone would fail the
// job (secret_integrity.go), so its absence is confirmed. A new job's other children are not
// read: they are created, and a name already taken is found by the create (createChild),
// which saves a new job one GET per such child.
func readThrough(job Object, want client.Object) bool {
	switch want.(type) {
	case *appsv1.StatefulSet, *batchv1.Job:
		return true
	case *corev1.Secret:
		if secretRecord(job.JobStatus(), want.GetName()) != nil {
			return true
		}
	}
	c := meta.FindStatusCondition(job.JobStatus().Conditions, troupev1.ConditionInitialized)
	return c != nil && c.Reason != troupev1.ReasonCreatingChildren
}

// getChild returns the object named like want from the cache, or nil when the cache has none
// and live is false; with live, a miss is read from the API server.
func (r *Reconciler) getChild(ctx context.Context, want client.Object, live bool) (client.Object, error) {
	cur := emptyLike(want)
	key := client.ObjectKeyFromObject(want)
	err := r.client.Get(ctx, key, cur)
	if apierrors.IsNotFound(err) && live {
		err = r.apiReader.Get(ctx, key, cur)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", keyOf(want).Kind, key.Name, err)
	}
	return cur, nil
}

// emptyLike is an empty object to read want's kind into; a Secret is read metadata-only (the
// engine never reads a generated Secret's data back).
func emptyLike(want client.Object) client.Object {
	if _, isSecret := want.(*corev1.Secret); isSecret {
		return OwnedSecret()
	}
	return reflect.New(reflect.TypeOf(want).Elem()).Interface().(client.Object)
}

// claim files cur, the object found under the name of the desired child want: the job's own
// child (adopted back first when it lost its owner reference), or else a conflict. It reports
// whether the object is the job's.
func (r *Reconciler) claim(ctx context.Context, job Object, s *Spec, want, cur client.Object, obs *Observed) (bool, error) {
	if !metav1.IsControlledBy(cur, job) && adoptable(job, cur) {
		ok := true
		if _, isSecret := want.(*corev1.Secret); isSecret {
			var err error
			if ok, err = r.adoptableSecret(ctx, job, want); err != nil {
				return false, err
			}
		}
		if ok {
			if err := r.adopt(ctx, job, s, want, cur); err != nil {
				return false, err
			}
		}
	}
	if !metav1.IsControlledBy(cur, job) {
		obs.Conflicts = append(obs.Conflicts, keyOf(want))
		return false, nil
	}
	obs.found(want, cur)
	return true, nil
}

// createChild creates want. When its name is taken (a child readThrough did not read: the
// job's own, which the cache had not brought in yet, or a foreign object), the object is read
// from the API server and claimed; the child it returns then is the job's to keep in shape,
// and nil means the name is someone else's: a conflict, after which the pass creates nothing.
func (r *Reconciler) createChild(ctx context.Context, job Object, s *Spec, want client.Object, obs *Observed) (created bool, cur client.Object, err error) {
	err = r.client.Create(ctx, want)
	if err == nil {
		obs.found(want, want)
		return true, nil, nil
	}
	k := keyOf(want)
	if !apierrors.IsAlreadyExists(err) {
		return false, nil, fmt.Errorf("create %s %s: %w", k.Kind, k.Name, err)
	}
	taken := emptyLike(want)
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), taken); err != nil {
		// Deleted since, or unreadable: the next pass finds out.
		return false, nil, fmt.Errorf("create %s %s: the name is taken, and reading it failed: %w", k.Kind, k.Name, err)
	}
	ours, err := r.claim(ctx, job, s, want, taken, obs)
	if err != nil || !ours {
		return false, nil, err
	}
	return false, taken, nil
}

// syncChildren creates missing children and puts owned ones back to their desired shape. It
// creates nothing while a name conflict exists or a Secret the pods need is missing (a job
// with half its children would hold resources without being able to run) and nothing once
// the job has finished (a finished job is never started again). Objects it does not own are
// never touched.
func (r *Reconciler) syncChildren(ctx context.Context, job Object, s *Spec, obs *Observed, finished bool) error {
	var created []ChildRef
	// One event for the children this pass created, told even when a later create fails.
	defer func() { r.recordCreated(job, created) }()
	for _, want := range Children(s, WorkersReleased(s, Verdict(job.JobStatus(), obs))) {
		cur, exists := obs.current[keyOf(want)]
		if !exists {
			made, taken, err := r.createMissing(ctx, job, s, want, obs, finished)
			if err != nil {
				return err
			}
			if made {
				created = append(created, keyOf(want))
			}
			if taken == nil {
				continue
			}
			cur = taken // the job's own child, which the cache had not brought in
		}
		if _, isMaster := want.(*batchv1.Job); isMaster && finished {
			continue // a finished Job's spec is left as it ended
		}
		if master, isMaster := want.(*batchv1.Job); isMaster {
			obs.Secrets.holdSuspended(cur.(*batchv1.Job), master)
		}
		if sts, ok := want.(*appsv1.StatefulSet); ok {
			r.warnScaledOutside(job, s, cur.(*appsv1.StatefulSet), sts)
			if holdTemplate(cur.(*appsv1.StatefulSet), sts, obs) {
				obs.HeldTemplates = append(obs.HeldTemplates, sts.Name)
			}
		}
		var before client.Object // the patch base of a child read metadata-only
		if _, metadataOnly := cur.(*metav1.PartialObjectMetadata); metadataOnly {
			before = cur.DeepCopyObject().(client.Object)
		}
		changed := restore(cur, want)
		if obs.gang[keyOf(want)] {
			changed = s.Gang.Restore(cur, want) || changed
		}
		if !changed {
			continue
		}
		if err := r.write(ctx, before, cur); err != nil {
			return fmt.Errorf("update %s %s: %w", keyOf(want).Kind, want.GetName(), err)
		}
	}
	return nil
}

// createMissing creates the missing child want, unless creating is held back: the job has
// finished, a name conflict or a Secret problem exists, or (for the master Job) the cache's
// copy of the job is not the latest. It reports whether it created want and, when want's name
// turned out to be taken by the job's own child, that child.
func (r *Reconciler) createMissing(ctx context.Context, job Object, s *Spec, want client.Object, obs *Observed, finished bool) (bool, client.Object, error) {
	if finished || len(obs.Conflicts) > 0 || len(obs.SecretProblems) > 0 || obs.Secrets.blocksCreation() {
		return false, nil, nil
	}
	if _, isMaster := want.(*batchv1.Job); isMaster {
		ok, err := r.masterCreationAllowed(ctx, job)
		if err != nil {
			return false, nil, err
		}
		if !ok {
			ctrl.LoggerFrom(ctx).V(2).Info("not creating the master Job: the cached job is not the latest")
			return false, nil, nil
		}
	}
	if g, ok := s.Backend.(Generator); ok {
		if err := g.Generate(s, want); err != nil {
			return false, nil, err
		}
	}
	if secret, isSecret := want.(*corev1.Secret); isSecret {
		if err := r.recordBeforeCreate(ctx, job, secret); err != nil {
			return false, nil, err
		}
	}
	made, taken, err := r.createChild(ctx, job, s, want, obs)
	if made {
		obs.Secrets.created(want)
	}
	return made, taken, err
}

// found counts cur as the job's existing child want (cur is want itself when this pass created
// it, as the API server returned it, so that the status this pass writes says what exists now
// (Initialized, the start time) instead of what existed before, which would cost a second
// status write as soon as the watch brings the children in).
func (obs *Observed) found(want, cur client.Object) {
	key := keyOf(want) // cur may be metadata only (a Secret)
	obs.Missing = slices.DeleteFunc(obs.Missing, func(m ChildRef) bool { return m == key })
	obs.current[key] = cur
	if obs.gang[key] {
		obs.Gang = cur
	}
	switch c := cur.(type) {
	case *batchv1.Job:
		obs.MasterJob = c
	case *appsv1.StatefulSet:
		obs.StatefulSets[c.Labels[troupev1.LabelWorkerSet]] = c
	}
}

// withoutMaster is a copy of the observation without the master Job (and so without its
// verdict), for a pass that sets the master Job aside (a restart, restart.go).
func (obs *Observed) withoutMaster() *Observed {
	c := *obs
	c.current = maps.Clone(obs.current)
	delete(c.current, keyOf(obs.MasterJob))
	c.MasterJob, c.Verdict = nil, ""
	return &c
}

// write stores the restored child cur. A child read metadata-only (a Secret; before is its
// state as read) is patched: its labels and annotations are all the engine restores, and it
// holds no data to update with.
func (r *Reconciler) write(ctx context.Context, before, cur client.Object) error {
	if before != nil {
		return r.client.Patch(ctx, cur, client.MergeFrom(before))
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
