// Package engine is the job library every troupe kind shares. An adapter turns its kind's spec
// into a Spec (one master run as a batch Job, zero or more worker sets run as StatefulSets, a
// backend that wires them together); the engine builds the children from it, keeps them in
// shape and computes the job's status from what it observes. The engine knows nothing of the
// framework (Chainer, Horovod) or the MPI flavour behind a kind.
package engine

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Object is a troupe job of any kind: an API object that carries the shared JobStatus.
type Object interface {
	client.Object
	JobStatus() *troupev1.JobStatus
}

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

// Describe builds the Spec of job, of kind gvk, with adapter a: the identity the engine owns,
// the rest from the adapter, then the checks every Spec passes before anything is built from it
// (troupe's bounds, no other job's credentials, no claim naming its volume unless the operator
// allows it, the repositories' URLs). It is the one way to a Spec: the engine's pass and the
// Kueue integration (which counts the job's pods) both use it.
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
	if err := checkClaimVolumeSources(s); err != nil {
		return nil, err
	}
	if err := troupev1.AppCodeURLErrors(field.NewPath("spec", "appCodesToSync"), s.CodeSync.Repos).ToAggregate(); err != nil {
		return nil, err // the webhook's rule, for a job admitted without it
	}
	return s, nil
}

// withinAdmission holds a running job that Kueue admitted to the pod counts of its admission
// (troupev1.AnnotationAdmittedPodSets): a worker set that asks more (kubectl scale, an edit)
// runs its admitted count until the job's Workload, made again at the new size, is admitted;
// the Kueue integration suspends the job for that meanwhile. Without it, the pods beyond the
// admission would start, on quota that belongs to others, in the seconds before the suspend.
// The engine's pass applies it after Describe; the Kueue integration's Describe does not, as it
// compares the job's asked size with its Workload's.
func withinAdmission(s *Spec, job Object) {
	value, ok := job.GetAnnotations()[troupev1.AnnotationAdmittedPodSets]
	if !ok || s.Suspended() {
		return
	}
	admitted := map[string]int32{}
	for _, kv := range strings.Split(value, ",") {
		name, count, _ := strings.Cut(kv, "=")
		if n, err := strconv.ParseInt(count, 10, 32); err == nil && n >= 0 {
			admitted[name] = int32(n)
		}
	}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		if n, ok := admitted[ws.Name]; ok && ws.Replicas > n {
			s.AwaitingAdmission = append(s.AwaitingAdmission, fmt.Sprintf("%s: %d asked, %d admitted", ws.Name, ws.Replicas, n))
			ws.Replicas = n
		}
	}
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

// checkBounds refuses a Spec larger than troupe's bounds before anything is built from it: the
// hostfile, the exec Role and the PodGroup list or count every pod, so a job admitted before
// the bounds existed (or written past a disabled webhook) must not make the operator build
// objects, and hold lists, of any size it asks for. Counted in int64, where int32 sums wrap.
func checkBounds(s *Spec) error {
	pods := int64(s.MasterPods())
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		pods += int64(ws.Replicas)
		if ws.Slots > troupev1.MaxSlotsPerPod {
			return &SpecError{Reason: troupev1.ReasonTooLarge,
				Err: fmt.Errorf("worker set %s: %d slots per pod, more than %d", ws.Name, ws.Slots, troupev1.MaxSlotsPerPod)}
		}
	}
	if pods > troupev1.MaxPodsPerJob {
		return &SpecError{Reason: troupev1.ReasonTooLarge,
			Err: fmt.Errorf("the job has %d pods, more than %d (the master and every worker); nothing is created", pods, troupev1.MaxPodsPerJob)}
	}
	if s.Master.Slots > troupev1.MaxSlotsPerPod {
		return &SpecError{Reason: troupev1.ReasonTooLarge,
			Err: fmt.Errorf("the master has %d slots, more than %d", s.Master.Slots, troupev1.MaxSlotsPerPod)}
	}
	return checkChildTemplateBytes(s)
}

// checkChildTemplateBytes refuses a job whose sets that run to completion would copy their
// template into more bytes of batch Jobs than troupev1.MaxChildTemplateBytes (the webhook
// refuses it at admission; this holds where it is off). Only those sets can multiply a
// template: every other child holds its template once, within the job's own size bound.
func checkChildTemplateBytes(s *Spec) error {
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		if !ws.RunsToCompletion {
			continue
		}
		size, total, err := troupev1.CopiedTemplateBytes(&ws.Template, ws.Replicas)
		if err != nil {
			return fmt.Errorf("worker set %s: %w", ws.Name, err)
		}
		if total > troupev1.MaxChildTemplateBytes {
			where := ws.TemplateField
			if where == "" {
				where = "worker set " + ws.Name
			}
			return &SpecError{Reason: troupev1.ReasonTooLarge, Err: fmt.Errorf(
				"%s: %d workers of a %d-byte pod template make %d bytes of batch Jobs (one per worker), more than %d; nothing is created",
				where, ws.Replicas, size, total, troupev1.MaxChildTemplateBytes)}
		}
	}
	return nil
}

// checkClaimVolumeSources refuses, unless the operator allows them, claims of runPolicy.storage
// that name the volume they come from: the webhook refuses them when the job is created; this
// holds for a job it was not asked about (created while it was down, or before an upgrade).
// The job reports InvalidSpec naming the field, and no claim (nor anything else) is created.
func checkClaimVolumeSources(s *Spec) error {
	if s.AllowClaimVolumeSources {
		return nil
	}
	return troupev1.ClaimVolumeSourceErrors(field.NewPath("spec", "runPolicy", "storage"), s.RunPolicy.Storage).ToAggregate()
}

// checkCredentialRefs refuses a spec that names a job's generated credentials (another job's
// SSH keys or exec account: troupev1.PodSpecCredentialRefs) in its pod templates or its
// required Secrets. The admission webhook refuses such a spec; this holds where the webhook
// is off or set to Ignore: the job reports InvalidSpec and nothing is created.
func checkCredentialRefs(s *Spec) error {
	errs := troupev1.PodSpecCredentialRefs(field.NewPath("master", "template", "spec"), &s.Master.Template.Spec)
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		errs = append(errs, troupev1.PodSpecCredentialRefs(field.NewPath("workerSets").Key(ws.Name).Child("template", "spec"), &ws.Template.Spec)...)
	}
	for _, rs := range s.RequiredSecrets {
		errs = append(errs, troupev1.GeneratedSecretRef(field.NewPath(rs.Field), rs.Name)...)
	}
	return errs.ToAggregate()
}

// Spec is the framework-neutral description of one job, built by a kind's adapter.
type Spec struct {
	// Name and Namespace are the job's; the headless Service is named like the job.
	Name      string
	Namespace string
	// Owner is the controller owner reference every child carries.
	Owner metav1.OwnerReference
	// NameLabel is the kind's label key, for example "chainerjob.troupe.dev/name"; every child
	// and pod carries NameLabel: Name.
	NameLabel string

	// MainContainer names the container of every pod that runs the framework's processes (for
	// example "chainer"); backends wire their transport into it.
	MainContainer string

	Master     Master
	WorkerSets []WorkerSet

	// ElasticWorkers says the framework follows its workers as they come and go (elastic
	// Horovod, torch elastic): the failure policy's rules may ignore a lost worker or fail the
	// job, and a failure no rule names is handled as without a policy.
	ElasticWorkers bool

	RunPolicy        troupev1.RunPolicy
	SchedulingPolicy troupev1.SchedulingPolicy
	// ContainerRestartRules says the cluster keeps a container's restartPolicy and
	// restartPolicyRules (KEP-5307: beta and on from Kubernetes 1.35): a master whose exit codes
	// the failure policy's rules act on then restarts in place for the other codes
	// (masterRestartsInPlace), instead of a new pod each retry.
	ContainerRestartRules bool
	// AllowClaimVolumeSources is the operator's setting that lets claims of RunPolicy.Storage
	// name the volume they come from (troupev1.ClaimVolumeSourceErrors); off, such a job is
	// refused before anything is created.
	AllowClaimVolumeSources bool

	// Backend wires the processes together (hostfile, credentials). Nil runs the master alone
	// with no wiring.
	Backend Backend

	// Gang admits the job's pods to the scheduler all together (a PodGroup). Nil schedules
	// pods one by one.
	Gang Gang

	// RunMode is debug mode, pause and the overrides a job runs after a pause (runmode.go).
	RunMode RunMode
	// CodeSync clones git repositories into every pod of the job before its containers start.
	CodeSync CodeSync

	// RequiredSecrets are Secrets of the user's the pods need (an SSH identity, a git deploy
	// key); while one is missing or lacks a key the job reports it and creates no missing
	// child.
	RequiredSecrets []SecretRequirement

	// AwaitingAdmission says, per worker set ("worker: 4 asked, 2 admitted"), where the job
	// asks more pods than Kueue admitted (withinAdmission): the set's Replicas are then the
	// admitted count.
	AwaitingAdmission []string

	// Plan is what the pass decided beyond the spec (Reconcile): the adapter leaves it empty.
	Plan Plan
	// Progress is how the job's pods report their progress (progress.go), set by the pass when
	// the operator serves the progress endpoint.
	Progress *ProgressWiring
}

// Master is the job's master (launcher): one pod run to completion by a batch Job.
type Master struct {
	// JobName is the name of the batch Job, for example "<job>-master".
	JobName  string
	Template corev1.PodTemplateSpec
	// TemplateField is where the template's volumes are written in the job's spec, for
	// messages (for example spec.mpiReplicaSpecs.Launcher.template; a launcher the operator
	// generates from the worker's template names the worker's).
	TemplateField string
	// BackoffLimit is the number of retries of the master pod before the job fails.
	BackoffLimit int32
	// ActiveDeadlineSeconds bounds the master's run time; nil is unbounded.
	ActiveDeadlineSeconds *int64
	// Slots is the number of processes the master runs itself.
	Slots int32
	// PodFailurePolicy of the master Job, for failures a retry cannot fix; nil has none.
	PodFailurePolicy *batchv1.PodFailurePolicy
	// IsHost says the master takes part in the computation (it is the first host of the
	// hostfile) rather than only launching it.
	IsHost bool
	// AfterWorkersReady holds the master Job's creation until every worker pod is Ready
	// (an MPIJob's launcherCreationPolicy WaitForWorkersReady).
	AfterWorkersReady bool
}

// WorkerSet is one group of identical worker pods, run by a StatefulSet, or, when its pods run
// to completion, by one batch Job per pod (docs/architecture.md, "Worker sets").
type WorkerSet struct {
	// Name identifies the set within the job (label troupe.dev/worker-set).
	Name string
	// ChildName is the name of the set's StatefulSet; its pods' hostnames are <ChildName>-<i>
	// (a StatefulSet's pods are named so too), which is also the name of each of its Jobs.
	ChildName string
	// RunsToCompletion: the set's pods end when their work does (a torch worker), rather than
	// serve until the master is done (an MPI worker's sshd), so each runs as a batch Job of one
	// pod, which is not restarted once it succeeds. A pod that fails is retried up to
	// BackoffLimit times; then its Job, and the job, fail.
	RunsToCompletion bool
	// TemplateField is where the set's template is in the job's spec, for messages (for example
	// spec.pytorchReplicaSpecs.Worker.template).
	TemplateField string
	BackoffLimit  int32
	// PodFailurePolicy and ActiveDeadlineSeconds are each Job's, for a set that runs to
	// completion: failures no retry can fix (kubeflow's restartPolicy ExitCode), and a bound on
	// the worker's run time (a job without a master's runPolicy.activeDeadlineSeconds).
	PodFailurePolicy      *batchv1.PodFailurePolicy
	ActiveDeadlineSeconds *int64
	Replicas              int32
	// Slots is the number of processes each pod of the set runs.
	Slots    int32
	Template corev1.PodTemplateSpec
	// ScaleHint tells a user who scaled the StatefulSet directly how to scale this set
	// instead, for example "kubectl scale mpijob/J --replicas={replicas}"; {replicas} becomes
	// the count they asked for.
	ScaleHint string
}

// Backend wires a job's processes together. It is chosen per job by the adapter. Both methods
// must be pure functions of the Spec.
type Backend interface {
	// Objects returns the extra children the backend needs (a hostfile ConfigMap, credential
	// Secrets, RBAC), without labels or owner references: the engine adds those.
	Objects(s *Spec) []client.Object
	// DecoratePod adds the backend's volumes, mounts and environment to a pod template of the
	// master (ws == nil) or of worker set ws.
	DecoratePod(s *Spec, ws *WorkerSet, tmpl *corev1.PodTemplateSpec)
}

// Gang is a gang-scheduling provider (pkg/gang): it adds the PodGroup that makes the
// scheduler admit the job's pods together, puts every pod into it, and reads its state.
type Gang interface {
	// Objects are the gang's children (the PodGroup), without labels or owner references.
	Objects(s *Spec) []client.Object
	// DecoratePod puts a pod of the job into the gang: scheduler name, group label or
	// annotation.
	DecoratePod(s *Spec, tmpl *corev1.PodTemplateSpec)
	// Restore puts the fields of an existing PodGroup the provider manages back to want's and
	// reports whether it changed anything.
	Restore(cur, want client.Object) bool
	// Condition is the job's GangScheduled condition from the observed PodGroup (nil when it
	// does not exist yet) and the job's pods.
	Condition(observed client.Object, pods []corev1.Pod) metav1.Condition
}

// IndexedDecorator is implemented by backends whose worker pods differ by their index (a torch
// worker's rank): the engine calls it on the pod template of each pod of a worker set that runs
// to completion (one Job per pod), after DecoratePod. It is also called on the template's
// outline (its labels and containers by name, nothing else: templateOutline), whose hash tells
// whether a Job's template is still the one wanted: what it writes must depend on its
// arguments, never on what else the template holds.
type IndexedDecorator interface {
	DecorateIndexedPod(s *Spec, ws *WorkerSet, index int32, tmpl *corev1.PodTemplateSpec)
}

// ServicePorter is implemented by backends whose processes listen on a port peers reach through
// the job's headless Service (a torch master's): the Service names it, so that tools that look
// ports up by name find it. DNS works without it.
type ServicePorter interface {
	ServicePorts(s *Spec) []corev1.ServicePort
}

// Generator is implemented by backends with children whose data is generated once, such as key
// pairs: the engine calls Generate on each child just before creating it, and afterwards never
// rewrites that child's data. Generate ignores children that are not its own.
type Generator interface {
	Generate(s *Spec, obj client.Object) error
}

// LauncherWaiter is implemented by backends whose launcher waits for its workers in an init
// container of its own (the MPI backend's troupe-wait). The engine reports that wait (the
// LauncherWaiting condition, the launcher-wait metrics) by the container the backend names, and
// names none itself.
type LauncherWaiter interface {
	LauncherWaitContainer() string
}

// launcherWaitContainer is the init container in which the master waits for its workers, or ""
// when the backend has none.
func (s *Spec) launcherWaitContainer() string {
	if w, ok := s.Backend.(LauncherWaiter); ok {
		return w.LauncherWaitContainer()
	}
	return ""
}

// CleanPodPolicy returns the effective clean-pod policy (default Running).
func (s *Spec) CleanPodPolicy() troupev1.CleanPodPolicy {
	if p := s.RunPolicy.CleanPodPolicy; p != nil {
		return *p
	}
	return troupev1.CleanPodPolicyRunning
}

// Suspended reports whether the job is asked to be suspended.
func (s *Spec) Suspended() bool {
	return s.RunPolicy.Suspend != nil && *s.RunPolicy.Suspend
}

// ServiceName is the name of the headless Service that gives pods their stable DNS names.
func (s *Spec) ServiceName() string { return s.Name }

// HostName is the stable DNS name of a job's pod under the headless Service. It leaves the
// cluster domain to the pod's DNS search path, so it works whatever the domain is.
func (s *Spec) HostName(podHostname string) string {
	return podHostname + "." + s.ServiceName() + "." + s.Namespace + ".svc"
}

// HasMaster says the job has a master. A job without one (Master.JobName empty: a PyTorchJob of
// workers only) ends when its workers do, so each of its worker sets runs to completion: it
// succeeds once every worker Job has, and fails when one fails.
func (s *Spec) HasMaster() bool { return s.Master.JobName != "" }

// MasterPods is the number of pods the master runs: 1, or 0 without a master.
func (s *Spec) MasterPods() int32 {
	if s.HasMaster() {
		return 1
	}
	return 0
}

// isMasterJob says a child Job is the master's (not a worker set's that runs to completion).
func (s *Spec) isMasterJob(o client.Object) bool {
	_, isJob := o.(*batchv1.Job)
	return isJob && s.HasMaster() && o.GetName() == s.Master.JobName
}

// MasterHostname is the pod hostname given to the master's pod (the Job's pods get no stable
// name by themselves; with hostname and subdomain set, DNS gives them one).
func (s *Spec) MasterHostname() string { return s.Master.JobName }

// WorkerHostnames lists the pod hostnames of a worker set, in ordinal order.
func (ws *WorkerSet) WorkerHostnames() []string {
	names := make([]string, 0, ws.Replicas)
	for i := range ws.Replicas {
		names = append(names, podOrdinalName(ws.ChildName, i))
	}
	return names
}

// TotalWorkers is the desired number of worker pods over every set.
func (s *Spec) TotalWorkers() int32 {
	var n int32
	for i := range s.WorkerSets {
		n += s.WorkerSets[i].Replicas
	}
	return n
}

// CleanPodPolicyOn returns when the clean-pod policy applies (default Finished).
func (s *Spec) CleanPodPolicyOn() troupev1.CleanPodPolicyOn {
	if on := s.RunPolicy.CleanPodPolicyOn; on != nil {
		return *on
	}
	return troupev1.CleanPodPolicyOnFinished
}

// CleanUpDue reports whether the clean-pod policy applies after the job ended with outcome:
// after any end by default, after success only with cleanPodPolicyOn Succeeded (a failed job
// then keeps its pods, for inspection). It is false while the job runs.
func (s *Spec) CleanUpDue(outcome troupev1.JobPhase) bool {
	switch outcome {
	case "":
		return false
	case troupev1.JobSucceeded:
		return true
	default:
		return s.CleanPodPolicyOn() != troupev1.CleanPodPolicyOnSucceeded
	}
}

// NetworkPolicyEnabled reports whether the job's pods are isolated by a NetworkPolicy of its
// own (runPolicy.networkPolicy.enabled): on unless the user turns it off.
func (s *Spec) NetworkPolicyEnabled() bool {
	np := s.RunPolicy.NetworkPolicy
	return np == nil || ptr.Deref(np.Enabled, true)
}

// DisruptionBudgetEnabled reports whether the job asks for a PodDisruptionBudget over its
// workers (schedulingPolicy.podDisruptionBudget.enabled).
func (s *Spec) DisruptionBudgetEnabled() bool {
	b := s.SchedulingPolicy.PodDisruptionBudget
	return b != nil && b.Enabled && len(s.WorkerSets) > 0
}

func podOrdinalName(statefulSet string, ordinal int32) string {
	return fmt.Sprintf("%s-%d", statefulSet, ordinal)
}

// CodeSync clones git repositories (appCodesToSync) into every pod of a job, one init
// container running `troupe-agent git-sync` per repository, before any other container starts.
type CodeSync struct {
	// Image is the troupe-agent image.
	Image string
	Repos []troupev1.AppCode
}

// SecretRequirement is a Secret of the user's that the job's pods mount, and the keys it must
// hold.
type SecretRequirement struct {
	// Field is the spec field that names the Secret, for example "spec.ssh.secretName".
	Field string
	// Name is the Secret's name in the job's namespace.
	Name string
	// Keys must each be present with a non-empty value.
	Keys []string
}

// withPlan is a copy of s that carries p.
func (s *Spec) withPlan(p Plan) *Spec {
	c := *s
	c.Plan = p
	return &c
}

// RunMode is how a job's replicas run besides their templates: debug mode replaces what they
// run, pause deletes them while keeping the job, and a job that was paused runs its resume
// overrides from then on. The adapter fills Debug, Pause, Resume and MasterType from its kind's
// spec; the engine fills what it observes.
type RunMode struct {
	// MasterType is the master's replica type in status.tasks ("launcher" or "master");
	// empty is "master".
	MasterType troupev1.ReplicaType
	// Debug, when set, replaces what the replicas run, whatever else is asked.
	Debug *ReplicaOverrides
	// Pause asks to delete the master Job and scale the worker sets to zero; the job and its
	// other children stay. It has no effect on a job that has finished (Plan.Pause says whether
	// it is in force).
	Pause bool
	// Resume is applied to the replicas from the moment the job is paused on, so that they
	// come back with it; nil resumes them as their templates say.
	Resume *ReplicaOverrides
}

// ReplicaOverrides are the overrides of each replica type.
type ReplicaOverrides struct {
	Master ReplicaOverride
	Worker ReplicaOverride
}

// ReplicaOverride changes what one replica type's pods run.
type ReplicaOverride struct {
	// SkipInitContainers removes every init container, the backend's (a launcher's wait)
	// included.
	SkipInitContainers bool
	// Command replaces the main container's command; nil keeps it.
	Command []string
	// Args replace the main container's args; nil keeps them, an empty list drops them.
	Args []string
}

// Paused reports whether the job's replicas are to be deleted now (Plan.Pause).
func (s *Spec) Paused() bool { return s.Plan.Pause }

// masterWanted reports whether the master Job is a desired child now.
func (s *Spec) masterWanted() bool {
	return s.HasMaster() && !s.Plan.Pause && !s.Plan.HoldMaster && !s.Plan.Restart.holdsMaster()
}

// masterType is the master's replica type in status.tasks.
func (s *Spec) masterType() troupev1.ReplicaType {
	if s.RunMode.MasterType == "" {
		return troupev1.ReplicaMaster
	}
	return s.RunMode.MasterType
}

// childRef names one child object of a job by kind and name.
type childRef struct {
	Kind string
	Name string
}

func (c childRef) String() string { return c.Kind + " " + c.Name }

// keyOf identifies a child by Go type and name (names are unique per kind in a namespace).
func keyOf(o client.Object) childRef {
	return childRef{Kind: reflect.TypeOf(o).Elem().Name(), Name: o.GetName()}
}

func mainContainer(tmpl *corev1.PodTemplateSpec, name string, orFirst bool) *corev1.Container {
	for i := range tmpl.Spec.Containers {
		if tmpl.Spec.Containers[i].Name == name {
			return &tmpl.Spec.Containers[i]
		}
	}
	if orFirst && len(tmpl.Spec.Containers) > 0 {
		return &tmpl.Spec.Containers[0]
	}
	return nil
}
