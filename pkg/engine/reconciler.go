package engine

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

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
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// The KubeExec transport's Role grants exec into a job's pods; RBAC lets the operator grant
// only what it holds itself (the alternative, escalate and bind on roles, would let it grant
// anything).
// +kubebuilder:rbac:groups="",resources=pods/exec,verbs=get;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

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
	// deferred holds back status changes that move only counts or progress (progressOnly,
	// writeStatus).
	deferred *deferredWrites
	// podCreates paces the lookups of refused pods (podCreatePace, below).
	podCreates *podCreatePace
	// gone remembers why worker pods the watch saw deleted were lost (gone_pods.go).
	gone *goneWorkers
	// secretVersions remembers generated Secrets created or verified until the status records
	// them (secrets.go).
	secretVersions secretVersions
	// lostNodes is how pods on nodes that stopped answering are treated (lost_nodes.go).
	lostNodes LostNodePolicy
	// outOfService remembers when nodes were first seen marked out of service (lost_nodes.go).
	outOfService outOfServiceSeen
	// progress is the progress endpoint the jobs' pods report to (progress.go); nil: none.
	progress *ProgressEndpoint
}

// HandleLostNodes sets how the reconciler treats the pods of nodes that stopped answering; it
// is called before SetupWithManager, which watches nodes only when policy has a timeout.
func (r *Reconciler) HandleLostNodes(policy LostNodePolicy) { r.lostNodes = policy }

// conflictRecheck is how often a job whose child names are taken, or whose Secrets are
// missing, looks again. The foreign objects carry none of our labels, so no watch event tells
// when they go away (or appear).
const conflictRecheck = 10 * time.Second

// refusedRecheck is how often a job whose child the API server refused to create (a quota, a
// namespace not opted in, a policy) tries again. What lifts the refusal (a quota raised, a
// label set) wakes no pass of the job: a steady recheck, where an error's backoff would grow to
// about 16 minutes.
const refusedRecheck = 30 * time.Second

// managedElsewhere reports whether the job's spec.managedBy or runPolicy.managedBy gives it to
// another controller (Kueue's MultiKueue, which dispatches it to a worker cluster, say): the
// engine then neither creates its children nor writes its status, as the Job controller does for
// a batch Job with spec.managedBy.
func managedElsewhere(job Object) bool {
	q, ok := job.(troupev1.QueuedJob)
	return ok && troupev1.ManagedElsewhere(q)
}

// The FailedCreate lookups (podCreateFailures) are uncached LISTs in the operator's shared API
// budget. Made on every pass and every 10 s while a child lacked pods, they let one tenant's
// stuck jobs (a ResourceQuota they exceed, say) spend the budget every other job needs. So a
// job looks only once its children have lacked pods for podCreateGrace (a controller creates
// pods within moments; most jobs never look), then again after podCreateFirstInterval,
// doubling up to podCreateMaxInterval; between lookups the job reports what the last one
// found. A child that gets its pods ends the pacing, and a later lack starts it afresh.
const (
	podCreateGrace         = 5 * time.Second
	podCreateFirstInterval = 10 * time.Second
	podCreateMaxInterval   = 5 * time.Minute
)

// podCreatePace holds, per job, when its next FailedCreate lookup is due.
type podCreatePace struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]*podCreateLookups
	// events answers the lookups of a namespace's jobs with one LIST.
	events *failedCreateEvents
}

type podCreateLookups struct {
	uid      types.UID // a job deleted and created again under its name starts afresh
	next     time.Time
	interval time.Duration
	// found is what the last lookup found, reported until the next one.
	found []string
}

func newPodCreatePace() *podCreatePace {
	return &podCreatePace{jobs: map[types.NamespacedName]*podCreateLookups{}, events: newFailedCreateEvents()}
}

// due reports whether the job lacking pods should look now, what the last lookup found and,
// when it should not look, how long until the next one.
func (p *podCreatePace) due(key types.NamespacedName, uid types.UID, now time.Time) (look bool, found []string, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.jobs[key]
	if !ok || l.uid != uid {
		l = &podCreateLookups{uid: uid, next: now.Add(podCreateGrace), interval: podCreateFirstInterval}
		p.jobs[key] = l
	}
	if wait := l.next.Sub(now); wait > 0 {
		return false, l.found, wait
	}
	return true, l.found, 0
}

// looked records a lookup's findings and returns how long until the next one.
func (p *podCreatePace) looked(key types.NamespacedName, now time.Time, found []string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.jobs[key]
	if !ok {
		return podCreateFirstInterval
	}
	wait := l.interval
	l.found, l.next, l.interval = found, now.Add(wait), min(2*l.interval, podCreateMaxInterval)
	return wait
}

// forget ends the job's pacing: its children have their pods, it ended, or it is gone.
func (p *podCreatePace) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.jobs, key)
}

// countsWriteDelay is how long a status change that moves only counts may wait before it is
// written. A job's pods change state one at a time (created, scheduled, running, ready, ended)
// and each change queues a pass; writing each count as it moves cost several status writes
// per job, each one a request under the operator's rate limit and a watch event for every
// client of the job. A change of phase or of a condition's status or reason is written at
// once, carrying whatever counts moved meanwhile; counts alone reach the API server within
// this delay of the first change seen (docs/performance.md).
const countsWriteDelay = 5 * time.Second

// deferredWrites remembers, per job, until when a counts-only status change may wait. It is
// the operator's memory only: after a restart the first such change is simply written. An
// entry lives from the first counts-only change to the pass that writes it (or finds nothing
// left to write, or the job gone), so the map holds at most the jobs with a change in flight.
type deferredWrites struct {
	// delay is how long a counts-only change may wait: countsWriteDelay, or 0 (written at
	// once) where a test reads every count as it moves.
	delay time.Duration
	mu    sync.Mutex
	due   map[types.NamespacedName]deferred
}

type deferred struct {
	uid types.UID // a job deleted and created again under its name starts afresh
	due time.Time
}

func newDeferredWrites(delay time.Duration) *deferredWrites {
	return &deferredWrites{delay: delay, due: map[types.NamespacedName]deferred{}}
}

// wait reports how much longer the job's counts-only change may wait: the first change seen
// waits the delay, later ones until the same moment. Zero means write now.
func (d *deferredWrites) wait(key types.NamespacedName, uid types.UID, now time.Time) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.due[key]
	if !ok || e.uid != uid {
		e = deferred{uid: uid, due: now.Add(d.delay)}
		d.due[key] = e
	}
	if left := e.due.Sub(now); left > 0 {
		return left
	}
	return 0
}

// forget drops the job's deferred change: its status was written, holds nothing new, or the
// job is gone.
func (d *deferredWrites) forget(key types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.due, key)
}

// goneWorkers remembers why each worker pod that the operator saw going was lost, by job UID and
// pod UID: the last state the API server sent of it as it went (a drain's eviction leaves the
// DisruptionTarget condition on it; workersGone says where it is fed). A pass that comes after
// the pod is gone (its StatefulSet may have replaced it already) then tells an evicted worker,
// which restarts the job without counting toward maxRestarts, from one deleted by hand, which
// counts. Memory only: after an operator restart a gone pod is Deleted, as before
// (docs/failure-handling.md).
type goneWorkers struct {
	mu   sync.Mutex
	jobs map[types.UID]map[types.UID]goneWorker
	// recorded lists the entries in the order they were recorded, which is the order of their
	// times: the expired ones are at its head, so that each record drops them in time
	// proportional to their number, not to every worker gone within goneWorkerTTL.
	recorded []goneKey
}

type goneWorker struct {
	reason troupev1.FailureReason
	at     time.Time
}

type goneKey struct {
	job, pod types.UID
	at       time.Time
}

// goneWorkerTTL is how long a gone worker's reason is kept: far longer than a pass takes to
// see it gone, short enough that the map stays small.
const goneWorkerTTL = 15 * time.Minute

func newGoneWorkers() *goneWorkers {
	return &goneWorkers{jobs: map[types.UID]map[types.UID]goneWorker{}}
}

// workersGone is the process's record of why worker pods went. It is fed from two places:
//   - the pods' cache transform (trimPod) records every state that says a worker is going (being
//     deleted, failed, disrupted) before the cache holds that state. The watch's handlers run
//     after the cache is updated, on a goroutine of their own, so a pass started by another
//     watch (the StatefulSet's, as it replaces the pod) could find the worker gone and its
//     replacement there before the pod handler had seen the deletion: a drained worker was then
//     taken for one deleted by hand (an e2e run of 30 Nov 2026 failed so);
//   - the pod watch's delete handler (recordingDeletes) records the last state of every deleted
//     worker, also one deleted at once with nothing said about why.
//
// One record serves every kind's reconciler and every manager in the process: it is keyed by
// job UID and pod UID, which no two objects share.
var workersGone = newGoneWorkers()

// recordGoing records pod in workersGone if its state says it is going: a pod the cache is
// about to hold so is never in the cache before its record.
func recordGoing(pod *corev1.Pod, now time.Time) {
	if pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodFailed && disruption(pod) == nil {
		return
	}
	workersGone.record(pod, now)
}

// record keeps why worker pod p went, if it is a worker of a troupe job.
func (g *goneWorkers) record(p *corev1.Pod, now time.Time) {
	job := types.UID(p.Labels[troupev1.LabelJobUID])
	if job == "" || p.Labels[troupev1.LabelRole] != troupev1.RoleWorker {
		return
	}
	reason := podFailure("", p).Reason // as a pass would read the pod
	g.mu.Lock()
	defer g.mu.Unlock()
	expired := 0
	for _, k := range g.recorded {
		if now.Sub(k.at) <= goneWorkerTTL {
			break
		}
		expired++
		// Only the entry recorded at that time: a pod recorded again since has a later one.
		if pods := g.jobs[k.job]; pods != nil && pods[k.pod].at.Equal(k.at) {
			delete(pods, k.pod)
			if len(pods) == 0 {
				delete(g.jobs, k.job)
			}
		}
	}
	g.recorded = append(g.recorded[expired:], goneKey{job: job, pod: p.UID, at: now})
	if g.jobs[job] == nil {
		g.jobs[job] = map[types.UID]goneWorker{}
	}
	g.jobs[job][p.UID] = goneWorker{reason: reason, at: now}
}

// of is why the job's worker pods that went were lost, by pod UID.
func (g *goneWorkers) of(job types.UID) map[types.UID]troupev1.FailureReason {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[types.UID]troupev1.FailureReason, len(g.jobs[job]))
	for uid, w := range g.jobs[job] {
		out[uid] = w.reason
	}
	return out
}

// secretVersions remembers, per job, the resourceVersion at which this process created or last
// verified each generated Secret, until the job's status records it. A status change that only
// records it may wait for the job's next change (progressOnly); meanwhile the passes know the
// Secret unchanged from it, without reading its data again. An entry goes once the status
// records the version, or with its job (Reconciler.forget); after a restart the Secret is read
// once, as before. The zero value is ready to use.
type secretVersions struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]jobSecretVersions
}

type jobSecretVersions struct {
	uid types.UID         // a job deleted and created again under its name starts afresh
	rv  map[string]string // by Secret name
}

// note remembers that the job's generated Secret, as created or verified, has the data recorded.
func (v *secretVersions) note(job Object, secret metav1.Object) {
	v.mu.Lock()
	defer v.mu.Unlock()
	key := client.ObjectKeyFromObject(job)
	e, ok := v.jobs[key]
	if !ok || e.uid != job.GetUID() {
		if v.jobs == nil {
			v.jobs = map[types.NamespacedName]jobSecretVersions{}
		}
		e = jobSecretVersions{uid: job.GetUID(), rv: map[string]string{}}
		v.jobs[key] = e
	}
	e.rv[secret.GetName()] = secret.GetResourceVersion()
}

// verified is the resourceVersion noted for the job's Secret name, "" if none.
func (v *secretVersions) verified(job Object, name string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.jobs[client.ObjectKeyFromObject(job)]
	if !ok || e.uid != job.GetUID() {
		return ""
	}
	return e.rv[name]
}

// recorded drops the note of the job's Secret name: the status records its version.
func (v *secretVersions) recorded(job Object, name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	key := client.ObjectKeyFromObject(job)
	if e, ok := v.jobs[key]; ok {
		delete(e.rv, name)
		if len(e.rv) == 0 {
			delete(v.jobs, key)
		}
	}
}

// forget drops every note of the job.
func (v *secretVersions) forget(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.jobs, key)
}
