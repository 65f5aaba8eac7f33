package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// Reconcile runs one pass over a job: load it, describe its spec, observe its children and pods
// (reads only), decide (every decision, made once, a pure function), act as the decision says
// (the deletes it calls for, then the children), and report (the one status write, events, the
// next wake-up).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.pass(ctx, req)
	if errors.Is(err, errJobChanged) {
		ctrl.LoggerFrom(ctx).V(2).Info("the job changed during the pass; the next one runs on the newer version")
		return ctrl.Result{}, nil
	}
	return res, err
}

// pass is Reconcile's pass; a write of the job's status that conflicted ends it with
// errJobChanged.
func (r *Reconciler) pass(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Load.
	job := r.adapter.NewObject()
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !job.GetDeletionTimestamp().IsZero() || managedElsewhere(job) {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues(r.gvk.Kind, klog.KObj(job)))
	prev := job.JobStatus().DeepCopy()

	// Describe.
	described, err := Describe(r.adapter, r.gvk, job)
	if err != nil {
		return ctrl.Result{}, r.reportInvalidSpec(ctx, job, err)
	}
	withinAdmission(described, job)
	wiring, ok := r.progress.wiring(job.GetNamespace(), r.gvk.Kind, job.GetName())
	if !ok {
		// The endpoint's CA is being made (the operator just started): pods built now would
		// lack it, and change their template once it is known.
		ctrl.LoggerFrom(ctx).V(2).Info("waiting for the progress endpoint's CA")
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	described.Progress = wiring
	// No pod may mount another job's claim (mounted_claims.go).
	var refusedClaim *SpecError
	switch err := r.checkMountedClaims(ctx, described); {
	case errors.As(err, &refusedClaim):
		// Looked at again as a taken child name is: the other job's claim may go away, and
		// its deletion wakes no pass of this job.
		return ctrl.Result{RequeueAfter: conflictRecheck}, r.reportInvalidSpec(ctx, job, err)
	case err != nil:
		return ctrl.Result{}, err
	}

	// Observe.
	obs, err := r.observe(ctx, job, described)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A job whose pods were made unwired keeps them so (progress.go).
	described.Progress = described.Progress.keptFor(podHolders(obs))

	// Plan, once: the pause, the restart, the master's pods, the verdict, whether children may
	// be created.
	d := decide(described, obs, prev)
	spec, obs := described.withPlan(d.plan), d.obs

	// Act: first the deletes the decision calls for, then the children.
	recordSecret := func(o *Observed, before *troupev1.JobStatus, secret *corev1.Secret) (*troupev1.JobStatus, error) {
		return r.recordSecret(ctx, job, spec, o, before, secret)
	}
	acted, err := r.act(ctx, job, spec, d, prev, recordSecret)
	var refused *createRefused
	switch {
	case errors.As(err, &refused):
		// Reported on the job below, and looked at again after refusedRecheck.
	case err != nil:
		return ctrl.Result{}, err
	case acted.Expired:
		return ctrl.Result{}, nil
	}

	// Report, from the status the pass wrote before a generated Secret if it did.
	if acted.Status != nil {
		prev = acted.Status
	}
	after := obs.after(acted)
	after.Refused = refused
	res, rerr := r.report(ctx, job, spec, after, prev)
	if refused != nil {
		return ctrl.Result{RequeueAfter: refusedRecheck}, rerr
	}
	return res, rerr
}

// forget drops what the reconciler keeps of a job between passes (a deferred status write,
// the pace of pod-create lookups), once the job is gone or no longer troupe's.
func (r *Reconciler) forget(key client.ObjectKey) {
	r.deferred.forget(key)
	r.podCreates.forget(key)
	r.secretVersions.forget(key)
	metrics.ForgetProgress(r.gvk.Kind, key.Namespace, key.Name)
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
		gone:       workersGone,
	}, nil
}

// SetupWithManager registers the reconciler: it watches the kind, the children it owns and
// the pods of its jobs (mapped back to the job through the kind's name label; the reconcile
// then selects pods by job UID). A pod's update queues a pass only when it changed what the
// engine reads of pods (podChanged), and a moment later when the pod was created or only moved
// on within its life (podWakeups); a worker StatefulSet's or a Job's update likewise when its
// controller only counted its pods' progress (childWakeups). Every watch counts the passes it
// asks for (countedWakeups).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	kind := r.gvk.Kind
	// watch adds a watch of obj's type whose events wake the jobs h maps them to, counted
	// under the type's kind.
	var b *builder.Builder
	var failed error
	watch := func(obj client.Object, h handler.EventHandler, opts ...builder.WatchesOption) {
		gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
		if err != nil {
			failed = errors.Join(failed, err)
			return
		}
		b = b.Watches(obj, countedWakeups{EventHandler: h, kind: kind, source: gvk.Kind}, opts...)
	}
	// owner wakes the job that controls the object, as the builder's Owns does.
	owner := func() handler.EventHandler {
		return handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), r.adapter.NewObject(), handler.OnlyControllerOwner())
	}
	podToJob := podWakeups{nameLabel: r.adapter.NameLabel(), delay: podProgressDelay}
	b = ctrl.NewControllerManagedBy(mgr).
		Named(kind).
		For(r.adapter.NewObject(), builder.WithPredicates(countedJobEvents(kind)))
	watch(&corev1.Pod{}, recordingDeletes{EventHandler: podToJob, gone: r.gone, now: r.clock.Now},
		builder.WithPredicates(podChanged(podToJob.nameLabel)))
	for _, t := range childTypes {
		switch {
		case t.progressDelayed:
			watch(t.object, childWakeups{EventHandler: owner(), delay: podProgressDelay})
		case t.metadataOnly:
			watch(t.object, owner(), builder.OnlyMetadata) // as CacheOptions holds it (ownedSecret)
		default:
			watch(t.object, owner())
		}
	}
	for _, o := range r.owned {
		watch(o, owner())
	}
	if r.progress != nil && r.progress.Wakeups != nil {
		b = b.WatchesRawSource(r.progress.Wakeups(kind,
			countedWakeups{EventHandler: &handler.EnqueueRequestForObject{}, kind: kind, source: ProgressReportSource}))
	}
	if r.lostNodes.Timeout > 0 {
		watch(&corev1.Node{}, r.nodeWatch(), builder.WithPredicates(nodeHealthChanged))
	}
	if failed != nil {
		return failed
	}
	metrics.SetRunningCounter(kind, r.runningCounter(mgr))
	return b.Complete(r.instrumented())
}

// instrumented wraps the reconciler: it counts the reconciles that fail, and makes the
// metrics of the job's kind and namespace exist from its first reconcile on (metrics.Touch).
func (r *Reconciler) instrumented() reconcile.Reconciler {
	kind := r.gvk.Kind
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		metrics.Touch(kind, req.Namespace)
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			metrics.ReconcileError(kind, req.Namespace)
		}
		return res, err
	})
}
