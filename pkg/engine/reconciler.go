package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/metrics"
)

// conflictRecheck is how often a job whose child names are taken, or whose Secrets are
// missing, looks again. The foreign objects carry none of our labels, so no watch event tells
// when they go away (or appear).
const conflictRecheck = 10 * time.Second

// Adapter turns one kind's spec into the engine's Spec. A kind is a types file, an adapter and
// a webhook file; the adapter knows nothing of StatefulSets or Jobs.
type Adapter interface {
	// NewObject returns an empty job of the kind.
	NewObject() Object
	// NameLabel is the label key that names the job on every child and pod, for example
	// "chainerjob.troupe.dev/name".
	NameLabel() string
	// Describe fills the master, worker sets, policies and backend of s from the job's spec.
	// Name, namespace, owner and NameLabel are already set. An error means the spec cannot be
	// run as written; it is reported on the job and nothing is created.
	Describe(job Object, s *Spec) error
}

// Reconciler drives every job of one kind through its lifecycle.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	adapter   Adapter
	gvk       schema.GroupVersionKind
	clock     clock.PassiveClock
	// owned are child types beyond the built-in ones (PodGroups of the gang providers whose
	// CRDs exist), watched like the others.
	owned []client.Object
	// deferred holds back status changes that move only counts (statuswrite.go).
	deferred *deferredWrites
	// podCreates paces the lookups of refused pods (podcreate_pace.go).
	podCreates *podCreatePace
}

// NewReconciler returns the engine's reconciler for the adapter's kind. owned are the types of
// children beyond the built-in ones that jobs may have (PodGroups); only types the cluster
// serves may be given.
func NewReconciler(mgr ctrl.Manager, a Adapter, owned ...client.Object) (*Reconciler, error) {
	gvk, err := apiutil.GVKForObject(a.NewObject(), mgr.GetScheme())
	if err != nil {
		return nil, fmt.Errorf("kind of adapter %T: %w", a, err)
	}
	return &Reconciler{
		client:     mgr.GetClient(),
		apiReader:  mgr.GetAPIReader(),
		recorder:   LimitNotes(mgr.GetEventRecorder("troupe-" + gvk.Kind)),
		adapter:    a,
		gvk:        gvk,
		clock:      clock.RealClock{},
		owned:      owned,
		deferred:   newDeferredWrites(countsWriteDelay),
		podCreates: newPodCreatePace(),
	}, nil
}

// SetupWithManager registers the reconciler: it watches the kind, the children it owns and
// the pods of its jobs (mapped back to the job through the kind's name label; the reconcile
// then selects pods by job UID). A pod's update queues a pass only when it changed what the
// engine reads of pods (podChanged).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	nameLabel := r.adapter.NameLabel()
	podToJob := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, pod client.Object) []reconcile.Request {
		name, ok := pod.GetLabels()[nameLabel]
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: pod.GetNamespace(), Name: name}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named(r.gvk.Kind).
		For(r.adapter.NewObject()).
		Watches(&corev1.Pod{}, podToJob, builder.WithPredicates(podChanged))
	for _, t := range childTypes {
		if t.metadataOnly {
			b = b.Owns(t.object, builder.OnlyMetadata) // as CacheOptions holds it (OwnedSecret)
		} else {
			b = b.Owns(t.object)
		}
	}
	for _, o := range r.owned {
		b = b.Owns(o)
	}
	metrics.SetRunningCounter(r.gvk.Kind, r.runningCounter(mgr))
	return b.Complete(r.instrumented())
}

// What the engine needs in every namespace where jobs run (docs/security.md, "Least
// privilege"): children are created and kept in shape, never deleted by name (owner references
// let the garbage collector delete them), except the master Job and pods that cleanup and run
// modes delete.
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=services;configmaps;serviceaccounts,verbs=get;list;watch;create;update;patch
// Secrets: create the SSH Secret, get the user's (uncached), list and watch the generated ones
// metadata-only, patch their labels; never update (no data is ever rewritten) nor delete.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// The KubeExec transport's Role grants exec into a job's pods; RBAC lets the operator grant
// only what it holds itself (the alternative, escalate and bind on roles, would let it grant
// anything).
// +kubebuilder:rbac:groups="",resources=pods/exec,verbs=get;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile runs one job through the phases of its lifecycle: describe the spec, observe the
// children, expire a finished job past its TTL, bring the children to their desired shape,
// clean up after the master, and write the status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	job := r.adapter.NewObject()
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		r.deferred.forget(req.NamespacedName)
		r.podCreates.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !job.GetDeletionTimestamp().IsZero() || managedElsewhere(job) {
		r.deferred.forget(req.NamespacedName)
		r.podCreates.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues(r.gvk.Kind, klog.KObj(job)))

	described, err := Describe(r.adapter, r.gvk, job)
	if err != nil {
		return ctrl.Result{}, r.reportInvalidSpec(ctx, job, err)
	}
	prev := job.JobStatus().DeepCopy()
	// Before the observation: pause (a paused job's master Job is deleted, not observed).
	paused, err := r.prepareRunMode(ctx, job, described, prev)
	if err != nil {
		return ctrl.Result{}, err
	}
	spec := described.withPlan(Plan{Pause: paused, WasPaused: WasPaused(prev)})
	obs, err := r.observe(ctx, job, spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	// After it: the restart, the master's pods; then the plan is whole, and the children are
	// built from it.
	restart, obs, err := r.settleRestart(ctx, spec, obs, prev)
	if err != nil {
		return ctrl.Result{}, err
	}
	holdMaster, err := r.settleRunMode(ctx, spec, obs)
	if err != nil {
		return ctrl.Result{}, err
	}
	finished := Finished(prev, obs)
	plan := spec.Plan
	plan.Restart, plan.RestartSeen = restart.state, restart.seen
	plan.HoldMaster = holdMaster
	plan.ReadyWorkers = ReadyWorkers(spec, obs)
	plan.Ended = finished
	spec = described.withPlan(plan)

	if finished {
		if expired, err := r.expireTTL(ctx, job, spec, prev); err != nil || expired {
			return ctrl.Result{}, err
		}
	}
	if err := r.syncChildren(ctx, job, spec, obs, finished); errors.Is(err, errJobChanged) {
		ctrl.LoggerFrom(ctx).V(2).Info("the job changed during the pass; the next one runs on the newer version")
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	// Turning the budget off is how a user lets a drain evict the workers of a running job;
	// runPolicy.networkPolicy.enabled set to false on a running job removes its policy.
	if !spec.DisruptionBudgetEnabled() {
		if err := r.deleteUnwanted(ctx, job, spec, &policyv1.PodDisruptionBudget{}); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !spec.NetworkPolicyEnabled() {
		if err := r.deleteUnwanted(ctx, job, spec, &networkingv1.NetworkPolicy{}); err != nil {
			return ctrl.Result{}, err
		}
	}
	if spec.CleanUpDue(Verdict(prev, obs)) && spec.CleanPodPolicy() == troupev1.CleanPodPolicyAll {
		if err := r.deletePods(ctx, liveMasterPods(obs)); err != nil {
			return ctrl.Result{}, err
		}
	}
	wait, err := r.writeStatus(ctx, job, spec, obs, prev)
	if err != nil {
		return ctrl.Result{}, err
	}
	return sooner(r.requeue(spec, obs, job.JobStatus()), wait), nil
}

// sooner is res, woken after wait at the latest (a deferred status write) when wait is set.
func sooner(res ctrl.Result, wait time.Duration) ctrl.Result {
	if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
		res.RequeueAfter = wait
	}
	return res
}

// Describe builds the Spec of job, of kind gvk, with adapter a: the identity the engine owns,
// the rest from the adapter, then the checks every Spec passes before anything is built from it
// (troupe's bounds, no other job's credentials, the repositories' URLs). It is the one way to a
// Spec: the engine's pass and the Kueue integration (which counts the job's pods) both use it.
func Describe(a Adapter, gvk schema.GroupVersionKind, job Object) (*Spec, error) {
	s := &Spec{
		Name:      job.GetName(),
		Namespace: job.GetNamespace(),
		Owner:     *metav1.NewControllerRef(job, gvk),
		NameLabel: a.NameLabel(),
	}
	if err := a.Describe(job, s); err != nil {
		return nil, err
	}
	if err := checkBounds(s); err != nil {
		return nil, err
	}
	if err := checkCredentialRefs(s); err != nil {
		return nil, err
	}
	if err := troupev1.AppCodeURLErrors(field.NewPath("spec", "appCodesToSync"), s.CodeSync.Repos).ToAggregate(); err != nil {
		return nil, err // the webhook's rule, for a job admitted without it
	}
	return s, nil
}

// requeue asks to be woken for the next time-driven step: a TTL expiry, or a recheck of taken
// child names or missing Secrets. Everything else is driven by watches.
func (r *Reconciler) requeue(s *Spec, obs *Observed, st *troupev1.JobStatus) ctrl.Result {
	if len(obs.Conflicts) > 0 || len(obs.SecretProblems) > 0 {
		return ctrl.Result{RequeueAfter: conflictRecheck}
	}
	if obs.PodCreateRecheck > 0 {
		return ctrl.Result{RequeueAfter: obs.PodCreateRecheck}
	}
	if ttl := s.RunPolicy.TTLSecondsAfterFinished; ttl != nil && st.CompletionTime != nil {
		expiry := st.CompletionTime.Add(time.Duration(*ttl) * time.Second)
		if d := expiry.Sub(r.clock.Now()); d > 0 {
			return ctrl.Result{RequeueAfter: d}
		}
		return ctrl.Result{RequeueAfter: time.Second}
	}
	return ctrl.Result{}
}

// expireTTL deletes a finished job whose ttlSecondsAfterFinished has passed; its children go
// with it through garbage collection. The TTLExpired event is told once the delete succeeded: a
// failed delete is retried, and telling it before would tell it again on every retry.
func (r *Reconciler) expireTTL(ctx context.Context, job Object, s *Spec, prev *troupev1.JobStatus) (bool, error) {
	ttl := s.RunPolicy.TTLSecondsAfterFinished
	if ttl == nil || prev.CompletionTime == nil {
		return false, nil
	}
	expiry := prev.CompletionTime.Add(time.Duration(*ttl) * time.Second)
	if r.clock.Now().Before(expiry) {
		return false, nil
	}
	ctrl.LoggerFrom(ctx).V(2).Info("deleting finished job past its TTL", "ttlSecondsAfterFinished", *ttl)
	if err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		// Not found: deleted by someone else meanwhile, which is not the TTL's doing.
		return true, client.IgnoreNotFound(err)
	}
	r.recorder.Eventf(job, nil, corev1.EventTypeNormal, troupev1.EventTTLExpired, "Delete",
		"deleting the job %ds after it finished (runPolicy.ttlSecondsAfterFinished)", *ttl)
	return true, nil
}

// liveMasterPods are the master's pods that are not being deleted (clean-pod policy All deletes
// them).
func liveMasterPods(obs *Observed) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range obs.Pods {
		if p := &obs.Pods[i]; p.Labels[troupev1.LabelRole] == troupev1.RoleMaster && p.DeletionTimestamp.IsZero() {
			out = append(out, p)
		}
	}
	return out
}

// writeStatus computes the status from the observation and writes it once, only if it changed.
// A change of counts alone waits (countsWriteDelay) for the next change of phase or condition
// to carry it; it returns how long it waits, after which the job is reconciled again.
func (r *Reconciler) writeStatus(ctx context.Context, job Object, s *Spec, obs *Observed, prev *troupev1.JobStatus) (time.Duration, error) {
	key := client.ObjectKeyFromObject(job)
	now := metav1.NewTime(r.clock.Now().Truncate(time.Second))
	next := ComputeStatus(s, obs, prev, job.GetGeneration(), now)
	if equality.Semantic.DeepEqual(prev, &next) {
		r.deferred.forget(key)
		return 0, nil
	}
	counts := countsOnly(prev, &next)
	if counts {
		if wait := r.deferred.wait(key, job.GetUID(), r.clock.Now()); wait > 0 {
			return wait, nil
		}
	}
	r.deferred.forget(key)
	if log := ctrl.LoggerFrom(ctx).V(2); log.Enabled() {
		log.Info("writing status", "phase", next.Phase, "countsOnly", counts, "changed", statusChanges(prev, &next))
	}
	if written, err := r.putStatus(ctx, job, prev, &next); err != nil || !written {
		return 0, err
	}
	r.recordTransitions(job, s, obs, prev, &next)
	r.recordRestart(job, prev, &next)
	r.recordSecretEvents(job, prev, &next)
	return 0, nil
}

// putStatus is the one write of a job's status: next (bounded by the function that computed
// it: ComputeStatus, invalidSpecStatus), when it differs from prev. written says whether it was written; a conflict is not an
// error (the job changed since the copy the pass read, and the watch event of that newer
// version is already queued: the next pass computes the status again from fresh data).
func (r *Reconciler) putStatus(ctx context.Context, job Object, prev, next *troupev1.JobStatus) (written bool, err error) {
	if equality.Semantic.DeepEqual(prev, next) {
		return false, nil
	}
	*job.JobStatus() = *next
	if err := r.client.Status().Update(ctx, job); err != nil {
		if apierrors.IsConflict(err) {
			ctrl.LoggerFrom(ctx).V(2).Info("status write raced a newer version; it will be recomputed")
			return false, nil
		}
		return false, fmt.Errorf("update status: %w", err)
	}
	return true, nil
}

// SpecError is an Adapter.Describe error with a reason of its own for the job's Initialized
// condition and event (for example a gang provider the cluster does not have); other errors
// are reported as InvalidSpec.
type SpecError struct {
	Reason string
	Err    error
}

func (e *SpecError) Error() string { return e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

// reportInvalidSpec records why the spec cannot be run, on the status and as an event.
func (r *Reconciler) reportInvalidSpec(ctx context.Context, job Object, cause error) error {
	prev := job.JobStatus().DeepCopy()
	next, reason := invalidSpecStatus(prev, cause, job.GetGeneration(), metav1.NewTime(r.clock.Now().Truncate(time.Second)))
	if written, err := r.putStatus(ctx, job, prev, &next); err != nil || !written {
		return err
	}
	// Told once, when the status that records it is written (events.go).
	r.recorder.Eventf(job, nil, corev1.EventTypeWarning, reason, "Validate", "%v", cause)
	r.countCreated(job, prev, &next)
	return nil
}

// invalidSpecStatus is the status of a job whose spec cannot be run: prev, Pending if it had no
// phase yet, with Initialized False saying why (reason InvalidSpec, or the SpecError's own).
func invalidSpecStatus(prev *troupev1.JobStatus, cause error, generation int64, now metav1.Time) (troupev1.JobStatus, string) {
	st := *prev.DeepCopy()
	if st.Phase == "" {
		st.Phase = troupev1.JobPending
	}
	st.ObservedGeneration = generation
	reason := troupev1.ReasonInvalidSpec
	var se *SpecError
	if errors.As(cause, &se) {
		reason = se.Reason
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: troupev1.ConditionInitialized, Status: metav1.ConditionFalse, Reason: reason, Message: cause.Error(),
		ObservedGeneration: generation, LastTransitionTime: now,
	})
	FitConditionMessages(st.Conditions)
	return st, reason
}
