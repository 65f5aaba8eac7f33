package kueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// Event reasons on the job, as Kueue's own job controllers give them.
const (
	EventCreatedWorkload  = "CreatedWorkload"
	EventStarted          = "Started"
	EventStopped          = "Stopped"
	EventFinishedWorkload = "FinishedWorkload"
	EventDeletedWorkload  = "DeletedWorkload"
	// EventReclaimed: an elastic job that shrank handed the quota of the pods it no longer runs
	// back to Kueue, and goes on.
	EventReclaimed = "ReclaimedPods"
	// EventAdmittedSlice: Kueue admitted the Workload slice of an elastic job's new size in place
	// of its Workload; the job grows without a stop (growBySlice).
	EventAdmittedSlice = "AdmittedSlice"
)

// The Workload and the job's spec are ours to write; ResourceFlavors, WorkloadPriorityClasses
// and PriorityClasses are read, uncached, when a job is admitted or queued.
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads/status,verbs=get;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=resourceflavors;workloadpriorityclasses,verbs=get
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get

// prebuiltRecheck is how often MultiKueue's copy of a job looks again for the Workload it names.
const prebuiltRecheck = 5 * time.Second

// Reconciler drives the Workload of every queued job of one kind.
type Reconciler struct {
	client   client.Client
	reader   client.Reader
	recorder events.EventRecorder
	clock    clock.PassiveClock
	gvk      schema.GroupVersionKind
	adapter  engine.Adapter
	// integration says whether Kueue's API is served; while it is not, queued jobs are held.
	integration *Integration
}

// Reconcile brings the job and its Workload into agreement: a queued job gets a Workload and
// stays suspended until Kueue admits it; admitted, it is placed and resumed; evicted, it is
// suspended and its quota handed back; finished, its Workload is marked Finished.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	held, err := r.reconcile(ctx, req)
	if errors.Is(err, errPrebuiltMissing) {
		// MultiKueue makes the Workload before the copy: it is gone, or the cache is behind.
		// The operator watches only Workloads of its jobs, so it looks again.
		ctrl.LoggerFrom(ctx).V(2).Info("waiting for the Workload MultiKueue made", "reason", err.Error())
		return ctrl.Result{RequeueAfter: prebuiltRecheck}, nil
	}
	if apierrors.IsConflict(err) {
		// The job or its Workload changed under us: the watch event of the newer version
		// reconciles again.
		ctrl.LoggerFrom(ctx).V(2).Info("write raced a newer version; reconciling again", "error", err.Error())
		return ctrl.Result{}, nil
	}
	if errors.Is(err, errSwapping) {
		return ctrl.Result{RequeueAfter: SwapGrace}, nil
	}
	if held && err == nil {
		// Held for want of Kueue: looked at again once the integration may have come on.
		return ctrl.Result{RequeueAfter: r.integration.Interval()}, nil
	}
	return ctrl.Result{}, err
}

// reconcile does one pass; held says the job is held because Kueue is not installed.
func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (held bool, err error) {
	job := r.adapter.NewObject()
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) && r.integration.Served() {
			return false, r.releaseOrphans(ctx, req)
		}
		return false, client.IgnoreNotFound(err)
	}
	qj, ok := job.(troupev1.QueuedJob)
	queue, queued := troupev1.Queued(job.GetLabels())
	if !ok || !queued {
		return false, nil
	}
	dispatched := troupev1.DispatchedByMultiKueue(qj)
	if troupev1.ManagedElsewhere(qj) && !dispatched {
		return false, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues(r.gvk.Kind, klog.KObj(job)))
	switch {
	case !r.integration.Served() && dispatched:
		return true, nil // it runs nowhere until Kueue dispatches it
	case !r.integration.Served():
		return true, r.holdWithoutKueue(ctx, job, qj, queue)
	case dispatched:
		return false, r.reconcileDispatched(ctx, job, qj, queue)
	}
	return false, r.reconcileQueued(ctx, job, qj, queue)
}

// holdWithoutKueue keeps a queued job suspended while the cluster serves no Kueue API, and
// says why on its Admitted condition: a job that names a LocalQueue never runs outside the
// quota it names. An ended job is left as it is.
func (r *Reconciler) holdWithoutKueue(ctx context.Context, job engine.Object, qj troupev1.QueuedJob, queue string) error {
	if job.JobStatus().Phase.Ended() {
		return nil
	}
	if !ptr.Deref(qj.JobRunPolicy().Suspend, false) {
		return r.suspend(ctx, job, qj, "it names a Kueue LocalQueue and Kueue is not installed")
	}
	return r.setCondition(ctx, job, metav1.Condition{
		Type: troupev1.ConditionAdmitted, Status: metav1.ConditionFalse, Reason: troupev1.ReasonKueueNotInstalled,
		Message: fmt.Sprintf("held suspended: it is labelled %s=%s, but the cluster serves no Kueue Workload API (%s, Kueue %s or newer); "+
			"it is queued once Kueue is installed, or runs at once without the label", troupev1.LabelQueueName, queue, kueuev1.GroupVersion, MinimumVersion),
	})
}

// reconcileQueued drives a queued job and its Workload while Kueue's API is served.
func (r *Reconciler) reconcileQueued(ctx context.Context, job engine.Object, qj troupev1.QueuedJob, queue string) error {
	sl, err := r.slices(ctx, job)
	if err != nil {
		return err
	}
	wl := sl.Current
	suspended := ptr.Deref(qj.JobRunPolicy().Suspend, false)
	if !job.GetDeletionTimestamp().IsZero() {
		for _, w := range slices.Concat(sl.Retired, sl.Superseded, sl.Unwanted, []*kueuev1.Workload{sl.Current, sl.Pending}) {
			if err := r.removeFinalizer(ctx, w); err != nil {
				return err
			}
		}
		return nil
	}
	if err := r.tidySlices(ctx, job, sl); err != nil {
		return err
	}
	if sl.Pending != nil {
		// A slice is wanted only while the job still grows by it (growBySlice).
		if s := r.describe(ctx, job); suspended || !r.growsBySlice(job, s, wl) {
			return r.withdrawSlice(ctx, job, sl.Pending, "the job no longer grows by it")
		}
	}

	switch {
	case wl != nil && !wl.DeletionTimestamp.IsZero():
		// Someone deleted the Workload: stop the job; a new Workload follows once it is gone.
		if !suspended && !job.JobStatus().Phase.Ended() {
			return r.suspend(ctx, job, qj, "its Workload was deleted")
		}
		return r.removeFinalizer(ctx, wl)
	case job.JobStatus().Phase.Ended():
		return r.finish(ctx, job, wl)
	case wl == nil:
		if !suspended {
			// Created while the defaulting webhook was not there to suspend it.
			return r.suspend(ctx, job, qj, "it is not admitted by Kueue yet")
		}
		if active(job) {
			return nil // its pods are still going
		}
		if name, ok := troupev1.PrebuiltWorkload(job.GetLabels()); ok {
			// MultiKueue's copy runs under the Workload made for it, never one of ours.
			return fmt.Errorf("%w: %s", errPrebuiltMissing, name)
		}
		return r.createWorkload(ctx, job, sl, queue)
	}

	// The job's worker counts changed since its Workload was made (kubectl scale, an edit):
	// Kueue charged it for the old size. An elastic job that shrank goes on and hands the pods
	// it no longer asks for back (shrinkWithinAdmission); otherwise, as Kueue does for its own
	// kinds, the job is stopped and its Workload made anew, which queues it again at its new
	// size.
	if s, change := r.podSetsChanged(ctx, job, wl); change != "" {
		kept, err := r.shrinkWithinAdmission(ctx, job, s, wl, suspended)
		if err != nil || kept {
			return err
		}
		if !suspended && r.growsBySlice(job, s, wl) {
			return r.growBySlice(ctx, job, s, sl, queue, change)
		}
		switch {
		case !suspended:
			return r.suspend(ctx, job, qj, "its pod sets changed ("+change+"); Kueue admits it again at its new size")
		case active(job):
			return nil // its pods are still going
		}
		if _, ok := troupev1.PrebuiltWorkload(job.GetLabels()); ok {
			return r.finishOutOfSync(ctx, wl, change)
		}
		return r.deleteWorkload(ctx, job, wl, change)
	}

	if ev := Evicted(wl); ev != nil {
		if !suspended {
			return r.suspend(ctx, job, qj, fmt.Sprintf("Kueue evicted its Workload (%s): %s", ev.Reason, ev.Message))
		}
		if HasQuota(wl) && !active(job) {
			if err := r.releaseQuota(ctx, wl, ev); err != nil {
				return err
			}
		}
		return r.setCondition(ctx, job, AdmittedCondition(wl, queue))
	}
	if suspended {
		if Admitted(wl) {
			return r.start(ctx, job, qj, wl, queue)
		}
		// Placed by an earlier admission: back to the templates as written, and no admitted
		// counts (suspended by someone else than the integration).
		before := job.DeepCopyObject().(engine.Object)
		restored := RestorePlacements(qj, wl)
		if _, ok := job.GetAnnotations()[troupev1.AnnotationAdmittedPodSets]; ok || restored {
			setAdmittedPodSets(job, "")
			return r.update(ctx, job, before)
		}
		if string(wl.Spec.QueueName) != queue {
			orig := wl.DeepCopy()
			wl.Spec.QueueName = kueuev1.LocalQueueName(queue)
			if err := r.client.Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
				return fmt.Errorf("move Workload %s to LocalQueue %s: %w", wl.Name, queue, err)
			}
		}
		return r.setCondition(ctx, job, AdmittedCondition(wl, queue))
	}
	if !Admitted(wl) {
		if Swapping(wl, sl.Retired, r.clock.Now()) {
			// Kueue finished the Workload the slice replaces and admits the slice next: the job
			// runs its admitted pods meanwhile.
			return errSwapping
		}
		return r.suspend(ctx, job, qj, "its Workload is not admitted by a ClusterQueue")
	}
	if err := r.recordCharged(ctx, job, wl); err != nil {
		return err
	}
	if err := r.setPodsReady(ctx, wl, PodsReady(job.JobStatus())); err != nil {
		return err
	}
	return r.setCondition(ctx, job, AdmittedCondition(wl, queue))
}

// setPodsReady writes the Workload's PodsReady condition when it changed: Kueue's
// waitForPodsReady evicts an admitted Workload that does not say its pods are ready in time.
func (r *Reconciler) setPodsReady(ctx context.Context, wl *kueuev1.Workload, ready bool) error {
	_, err := r.writePodsReady(ctx, wl, ready)
	return err
}

// writePodsReady is setPodsReady, saying whether it wrote.
func (r *Reconciler) writePodsReady(ctx context.Context, wl *kueuev1.Workload, ready bool) (bool, error) {
	c := PodsReadyCondition(wl, ready)
	if old := meta.FindStatusCondition(wl.Status.Conditions, c.Type); old != nil &&
		old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
		return false, nil
	}
	orig := wl.DeepCopy()
	c.LastTransitionTime = metav1.NewTime(r.clock.Now())
	meta.SetStatusCondition(&wl.Status.Conditions, c)
	if err := r.client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("write the PodsReady condition of Workload %s: %w", wl.Name, err)
	}
	return true, nil
}

// workload returns the job's Workload, or nil: the one the operator makes, or for MultiKueue's
// copy of a job the one MultiKueue made for it (adopted: see prebuiltWorkload).
func (r *Reconciler) workload(ctx context.Context, job engine.Object) (*kueuev1.Workload, error) {
	if name, ok := troupev1.PrebuiltWorkload(job.GetLabels()); ok {
		return r.prebuiltWorkload(ctx, job, name)
	}
	wl := &kueuev1.Workload{}
	key := client.ObjectKey{Namespace: job.GetNamespace(), Name: WorkloadName(r.gvk, job.GetName(), job.GetUID())}
	if err := r.client.Get(ctx, key, wl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get Workload %s: %w", key.Name, err)
	}
	return wl, nil
}

// slices returns the job's Workloads (JobSlices), found by its UID's label: the one it controls
// and its slices. MultiKueue's copy of a job has one, the Workload MultiKueue made for it.
func (r *Reconciler) slices(ctx context.Context, job engine.Object) (Slices, error) {
	if name, ok := troupev1.PrebuiltWorkload(job.GetLabels()); ok {
		wl, err := r.prebuiltWorkload(ctx, job, name)
		return Slices{Current: wl}, err
	}
	list := &kueuev1.WorkloadList{}
	if err := r.client.List(ctx, list, client.InNamespace(job.GetNamespace()),
		client.MatchingLabels{troupev1.LabelJobUID: string(job.GetUID())}); err != nil {
		return Slices{}, fmt.Errorf("list the Workloads of the job: %w", err)
	}
	sl := JobSlices(list.Items)
	if len(list.Items) > 1 {
		ctrl.LoggerFrom(ctx).V(2).Info("the job's Workloads", "slices", sl.String())
	}
	return sl, nil
}

// active reports whether pods of the job are still pending or running.
func active(job engine.Object) bool {
	return slices.ContainsFunc(job.JobStatus().ReplicaStatuses, func(rs troupev1.ReplicaStatus) bool { return rs.Active > 0 })
}

// describe is the job's spec as its adapter describes it, or nil when the spec cannot run (the
// engine reports that on the job; there is nothing to queue).
func (r *Reconciler) describe(ctx context.Context, job engine.Object) *engine.Spec {
	s, err := engine.Describe(r.adapter, r.gvk, job)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("not queueing a job whose spec cannot run", "reason", err.Error())
		return nil
	}
	return s
}

// podSetsChanged says how the job's pod sets now differ from what its Workload charges
// ("ws0: 2 -> 3"): its pod sets, less the pods given back (shrinkWithinAdmission) while it is
// admitted; "" when they agree (or the spec cannot run). It returns the job's spec too.
func (r *Reconciler) podSetsChanged(ctx context.Context, job engine.Object, wl *kueuev1.Workload) (*engine.Spec, string) {
	s := r.describe(ctx, job)
	if s == nil {
		return nil, ""
	}
	// Counts only: building the whole Workload would copy every template on every pass.
	want := PodSetCounts(s, job.(troupev1.QueuedJob).PodSets()[0].Name)
	have := wl.Spec.PodSets
	if len(wl.Status.ReclaimablePods) > 0 && HasQuota(wl) {
		charged := ChargedPodSets(wl)
		have = make([]kueuev1.PodSet, 0, len(wl.Spec.PodSets))
		for _, ps := range wl.Spec.PodSets {
			have = append(have, kueuev1.PodSet{Name: ps.Name, Count: charged[ps.Name]})
		}
	}
	return s, PodSetCountsChange(have, want)
}

// shrinkWithinAdmission keeps an admitted elastic job (torch elastic, elastic Horovod: their
// workers come and go without a restart) running when it asks for no more pods than Kueue still
// charges it for: the pods it no longer runs are handed back as reclaimable (the Workload's
// status.reclaimablePods, which Kueue stops charging, as it does for its own Jobs' finished
// pods), once they are gone, and the job's admitted counts follow, so that the engine never
// brings them back without a new admission. Kueue refuses a smaller reclaimable count while it
// holds the quota, so a scale-up past what is still charged stops the job and queues it again
// (kept false), as any other change. It reports whether the job goes on.
func (r *Reconciler) shrinkWithinAdmission(ctx context.Context, job engine.Object, s *engine.Spec, wl *kueuev1.Workload, suspended bool) (bool, error) {
	if s == nil || !s.ElasticWorkers || suspended || !Admitted(wl) {
		return false, nil
	}
	charged := ChargedPodSets(wl)
	want := PodSetCounts(s, job.(troupev1.QueuedJob).PodSets()[0].Name)
	for _, ps := range want {
		if n, ok := charged[ps.Name]; !ok || ps.Count > n {
			return false, nil
		}
	}
	// A pod set's pods still running are not handed back before they are gone.
	active := map[kueuev1.PodSetReference]int32{}
	for _, rs := range job.JobStatus().ReplicaStatuses {
		active[kueuev1.PodSetReference(rs.Name)] = rs.Active
	}
	reclaim := ReclaimablePods(wl, want, active)
	if !slices.Equal(reclaim, wl.Status.ReclaimablePods) {
		orig := wl.DeepCopy()
		wl.Status.ReclaimablePods = reclaim
		if err := r.client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, fmt.Errorf("hand back the pods of Workload %s that the job no longer runs: %w", wl.Name, err)
		}
		r.recorder.Eventf(job, wl, corev1.EventTypeNormal, EventReclaimed, "Reclaim",
			"gave back to Kueue the quota of pods the job no longer runs (%s); it goes on at its new size", reclaimNote(reclaim))
	}
	return true, r.recordCharged(ctx, job, wl)
}

// recordCharged keeps a running job's record of its admitted pod counts
// (troupev1.AnnotationAdmittedPodSets) equal to what Kueue still charges its Workload for: the
// admission's counts, less the pods handed back (shrinkWithinAdmission). On every pass, so that a
// write that conflicted is made again.
func (r *Reconciler) recordCharged(ctx context.Context, job engine.Object, wl *kueuev1.Workload) error {
	before := job.DeepCopyObject().(engine.Object)
	setAdmittedPodSets(job, AdmittedPodSets(wl))
	if equality.Semantic.DeepEqual(before.GetAnnotations(), job.GetAnnotations()) {
		return nil
	}
	return r.update(ctx, job, before)
}

// deleteWorkload deletes the Workload of a suspended job whose pod sets changed; once it is
// gone (the next pass lets Kueue's finalizer go), a new one is made.
func (r *Reconciler) deleteWorkload(ctx context.Context, job engine.Object, wl *kueuev1.Workload, change string) error {
	if err := r.client.Delete(ctx, wl, client.Preconditions{UID: &wl.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Workload %s: %w", wl.Name, err)
	}
	r.recorder.Eventf(job, wl, corev1.EventTypeNormal, EventDeletedWorkload, "Requeue",
		"deleted Workload %s: the job's pod sets changed (%s); a new one queues it at its new size", wl.Name, change)
	return nil // the deletion's watch event brings the pass that lets Kueue's finalizer go
}

// createWorkload makes the job's Workload from its spec as the adapter describes it, and says
// so on its Admitted condition. An elastic job that grows by slices (SlicesEnabled) has an
// elastic Workload, as Kueue's own kinds have.
func (r *Reconciler) createWorkload(ctx context.Context, job engine.Object, sl Slices, queue string) error {
	wl, err := r.makeWorkload(ctx, job, queue, r.workloadName(job, sl), SlicesEnabled)
	if err != nil || wl == nil {
		return err
	}
	return r.setCondition(ctx, job, AdmittedCondition(wl, queue))
}

// makeWorkload makes the job's Workload, named name, from its spec as the adapter describes it,
// marked elastic to Kueue when elastic says so; nil when the spec cannot run.
func (r *Reconciler) makeWorkload(ctx context.Context, job engine.Object, queue, name string,
	elastic func(metav1.Object, *engine.Spec) bool) (*kueuev1.Workload, error) {
	s := r.describe(ctx, job)
	if s == nil {
		return nil, nil
	}
	prio, err := r.priority(ctx, job, s)
	if err != nil {
		return nil, err
	}
	wl, err := BuildWorkload(s, r.gvk, job.(troupev1.QueuedJob).PodSets(), queue, prio)
	if err != nil {
		return nil, err
	}
	wl.Name = name
	if elastic != nil && elastic(job, s) {
		wl.Annotations = map[string]string{troupev1.AnnotationElasticJob: "true"}
	}
	if err := r.client.Create(ctx, wl); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create Workload %s: %w", wl.Name, err)
	}
	r.recorder.Eventf(job, wl, corev1.EventTypeNormal, EventCreatedWorkload, "Queue",
		"created Workload %s in LocalQueue %s", wl.Name, queue)
	return wl, nil
}

// priority is the Workload's priority: the WorkloadPriorityClass the job's
// kueue.x-k8s.io/priority-class label names, else the PriorityClass of its scheduling policy or
// of its templates, else none (0).
func (r *Reconciler) priority(ctx context.Context, job engine.Object, s *engine.Spec) (Priority, error) {
	if name := job.GetLabels()[troupev1.LabelWorkloadPriorityClass]; name != "" {
		wpc := &kueuev1.WorkloadPriorityClass{}
		if err := r.reader.Get(ctx, client.ObjectKey{Name: name}, wpc); err != nil {
			return Priority{}, fmt.Errorf("WorkloadPriorityClass %s of label %s: %w", name, troupev1.LabelWorkloadPriorityClass, err)
		}
		ref := kueuev1.NewPriorityClassRef(kueuev1.WorkloadPriorityClassGroup, kueuev1.WorkloadPriorityClassKind, name)
		return Priority{Ref: ref, Value: ptr.To(wpc.Value)}, nil
	}
	name := s.SchedulingPolicy.PriorityClassName
	templates := workerTemplates(s)
	if s.HasMaster() {
		templates = append([]*corev1.PodTemplateSpec{&s.Master.Template}, templates...)
	}
	for _, t := range templates {
		if name == "" {
			name = t.Spec.PriorityClassName
		}
	}
	if name == "" {
		return Priority{Value: ptr.To[int32](0)}, nil
	}
	pc := &schedulingv1.PriorityClass{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: name}, pc); err != nil {
		return Priority{}, fmt.Errorf("PriorityClass %s: %w", name, err)
	}
	ref := kueuev1.NewPriorityClassRef(kueuev1.PodPriorityClassGroup, kueuev1.PodPriorityClassKind, name)
	return Priority{Ref: ref, Value: ptr.To(pc.Value)}, nil
}

func workerTemplates(s *engine.Spec) []*corev1.PodTemplateSpec {
	out := make([]*corev1.PodTemplateSpec, 0, len(s.WorkerSets))
	for i := range s.WorkerSets {
		out = append(out, &s.WorkerSets[i].Template)
	}
	return out
}

// start places the admitted job's pod sets where Kueue put them and resumes it, in one write
// (a job's templates may change only while it is suspended, and this write still sees it so).
func (r *Reconciler) start(ctx context.Context, job engine.Object, qj troupev1.QueuedJob, wl *kueuev1.Workload, queue string) error {
	before := job.DeepCopyObject().(engine.Object)
	flavors := map[string]*kueuev1.ResourceFlavor{}
	for _, a := range wl.Status.Admission.PodSetAssignments {
		for _, name := range a.Flavors {
			if _, ok := flavors[string(name)]; ok {
				continue
			}
			rf := &kueuev1.ResourceFlavor{}
			if err := r.reader.Get(ctx, client.ObjectKey{Name: string(name)}, rf); err != nil {
				return fmt.Errorf("ResourceFlavor %s: %w", name, err)
			}
			flavors[string(name)] = rf
		}
	}
	placements, err := Placements(wl, flavors)
	if err != nil {
		// Nothing the job can do about it but say so; Kueue's own jobs stay suspended too.
		if cerr := r.setCondition(ctx, job, metav1.Condition{Type: troupev1.ConditionAdmitted, Status: metav1.ConditionFalse,
			Reason: troupev1.ReasonQueued, Message: fmt.Sprintf("admitted by ClusterQueue %s but cannot start: %v", wl.Status.Admission.ClusterQueue, err)}); cerr != nil {
			return cerr
		}
		return err
	}
	ApplyPlacements(qj, placements)
	setAdmittedPodSets(job, AdmittedPodSets(wl))
	qj.JobRunPolicy().Suspend = ptr.To(false)
	if err := r.update(ctx, job, before); err != nil {
		return err
	}
	r.recorder.Eventf(job, wl, corev1.EventTypeNormal, EventStarted, "Admit",
		"admitted by ClusterQueue %s", wl.Status.Admission.ClusterQueue)
	return r.setCondition(ctx, job, AdmittedCondition(wl, queue))
}

// suspend stops the job; its pods go (the engine suspends the master Job and scales the worker
// sets to zero). Its templates are put back on a later pass, once the stored job is suspended.
func (r *Reconciler) suspend(ctx context.Context, job engine.Object, qj troupev1.QueuedJob, why string) error {
	before := job.DeepCopyObject().(engine.Object)
	qj.JobRunPolicy().Suspend = ptr.To(true)
	setAdmittedPodSets(job, "")
	if err := r.update(ctx, job, before); err != nil {
		return err
	}
	r.recorder.Eventf(job, nil, corev1.EventTypeNormal, EventStopped, "Suspend", "suspended: %s", why)
	return nil
}

// releaseQuota hands an evicted Workload's quota back once the job's pods are gone, so that
// Kueue queues it again: no admission, QuotaReserved False, and Requeued after a preemption.
// A merge patch of the status, guarded by the resourceVersion, as Kueue's own job controllers
// write it with WorkloadRequestUseMergePatch.
func (r *Reconciler) releaseQuota(ctx context.Context, wl *kueuev1.Workload, ev *metav1.Condition) error {
	orig := wl.DeepCopy()
	now := metav1.NewTime(r.clock.Now())
	wl.Status.Admission = nil
	set := func(t string, st metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
			Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: wl.Generation,
		})
	}
	set(kueuev1.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", ev.Message)
	set(kueuev1.WorkloadAdmitted, metav1.ConditionFalse, "NoReservation", "The workload has no reservation")
	requeued := metav1.ConditionFalse
	if ev.Reason == kueuev1.WorkloadEvictedByPreemption || ev.Reason == kueuev1.WorkloadEvictedDueToNodeFailures {
		requeued = metav1.ConditionTrue
	}
	set(kueuev1.WorkloadRequeued, requeued, ev.Reason, ev.Message)
	if meta.FindStatusCondition(wl.Status.Conditions, kueuev1.WorkloadPodsReady) != nil {
		// Not admitted any more: its next admission starts the wait for its pods afresh.
		c := PodsReadyCondition(wl, false)
		set(c.Type, c.Status, c.Reason, c.Message)
	}
	if err := r.client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("hand back the quota of Workload %s: %w", wl.Name, err)
	}
	return nil
}

// finish marks the Workload of an ended job Finished, which hands its quota back, and then
// lets it go (Kueue's finalizer).
func (r *Reconciler) finish(ctx context.Context, job engine.Object, wl *kueuev1.Workload) error {
	if wl == nil {
		return nil
	}
	if !Finished(wl) {
		reason, msg := kueuev1.WorkloadFinishedReasonSucceeded, "the job succeeded"
		if job.JobStatus().Phase == troupev1.JobFailed {
			reason, msg = kueuev1.WorkloadFinishedReasonFailed, "the job failed"
			if c := meta.FindStatusCondition(job.JobStatus().Conditions, troupev1.ConditionFailed); c != nil && c.Message != "" {
				msg = c.Message
			}
		}
		orig := wl.DeepCopy()
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
			Type: kueuev1.WorkloadFinished, Status: metav1.ConditionTrue, Reason: reason, Message: msg,
			LastTransitionTime: metav1.NewTime(r.clock.Now()), ObservedGeneration: wl.Generation,
		})
		if err := r.client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("mark Workload %s finished: %w", wl.Name, err)
		}
		r.recorder.Eventf(job, wl, corev1.EventTypeNormal, EventFinishedWorkload, "Finish", "Workload %s is finished: %s", wl.Name, msg)
	}
	return r.removeFinalizer(ctx, wl)
}

// removeFinalizer lets the Workload go.
func (r *Reconciler) removeFinalizer(ctx context.Context, wl *kueuev1.Workload) error {
	if wl == nil || !slices.Contains(wl.Finalizers, ResourceInUseFinalizer) {
		return nil
	}
	orig := wl.DeepCopy()
	wl.Finalizers = slices.DeleteFunc(wl.Finalizers, func(f string) bool { return f == ResourceInUseFinalizer })
	if err := r.client.Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove the finalizer of Workload %s: %w", wl.Name, err)
	}
	return nil
}

// releaseOrphans lets the Workloads of a deleted job go: the garbage collector deletes them,
// and Kueue's finalizer waits for the job's controller.
func (r *Reconciler) releaseOrphans(ctx context.Context, req ctrl.Request) error {
	list := &kueuev1.WorkloadList{}
	if err := r.client.List(ctx, list, client.InNamespace(req.Namespace)); err != nil {
		return fmt.Errorf("list Workloads: %w", err)
	}
	for i := range list.Items {
		wl := &list.Items[i]
		owner := metav1.GetControllerOf(wl)
		if owner == nil || owner.Kind != r.gvk.Kind || owner.APIVersion != r.gvk.GroupVersion().String() || owner.Name != req.Name {
			continue
		}
		if err := r.removeFinalizer(ctx, wl); err != nil {
			return err
		}
	}
	return nil
}

// update writes what changed in the job since before, as a merge patch guarded by before's
// resourceVersion (a conflict retries with the newer job). A patch, not an update: the cached
// job lacks what the cache drops (kubectl's last-applied-configuration, engine.CacheOptions),
// which an update would delete from the stored job.
func (r *Reconciler) update(ctx context.Context, job, before engine.Object) error {
	if err := r.client.Patch(ctx, job, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update the job: %w", err)
	}
	return nil
}

// setCondition writes the job's Admitted condition when it changed.
func (r *Reconciler) setCondition(ctx context.Context, job engine.Object, c metav1.Condition) error {
	st := job.JobStatus()
	c.Message = engine.FitConditionMessage(c.Message)
	if old := meta.FindStatusCondition(st.Conditions, c.Type); old != nil &&
		old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
		return nil
	}
	c.ObservedGeneration = job.GetGeneration()
	c.LastTransitionTime = metav1.NewTime(r.clock.Now().Truncate(1e9))
	meta.SetStatusCondition(&st.Conditions, c)
	if err := r.client.Status().Update(ctx, job); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}

// setAdmittedPodSets sets the job's record of its admitted pod counts
// (troupev1.AnnotationAdmittedPodSets) to value, or removes it when value is "".
func setAdmittedPodSets(job engine.Object, value string) {
	const key = troupev1.AnnotationAdmittedPodSets
	ann := job.GetAnnotations()
	if value == "" {
		if _, ok := ann[key]; ok {
			delete(ann, key)
			job.SetAnnotations(ann)
		}
		return
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[key] = value
	job.SetAnnotations(ann)
}
