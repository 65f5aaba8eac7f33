// Package engine is the job library every troupe kind shares. An adapter turns its kind's spec
// into a Spec (one master run as a batch Job, zero or more worker sets run as StatefulSets, a
// backend that wires them together); the engine builds the children from it, keeps them in
// shape and computes the job's status from what it observes. The engine knows nothing of the
// framework (Chainer, Horovod) or the MPI flavour behind a kind.
package engine

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Object is a troupe job of any kind: an API object that carries the shared JobStatus.
type Object interface {
	client.Object
	JobStatus() *troupev1.JobStatus
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

	RunPolicy        troupev1.RunPolicy
	SchedulingPolicy troupev1.SchedulingPolicy

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

	// Plan is what the pass decided beyond the spec (plan.go): the adapter leaves it empty.
	Plan Plan
}

// Master is the job's master (launcher): one pod run to completion by a batch Job.
type Master struct {
	// JobName is the name of the batch Job, for example "<job>-master".
	JobName  string
	Template corev1.PodTemplateSpec
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
}

// WorkerSet is one group of identical worker pods run by a StatefulSet.
type WorkerSet struct {
	// Name identifies the set within the job (label troupe.dev/worker-set).
	Name string
	// StatefulSetName is the name of the StatefulSet; its pods are <StatefulSetName>-<i>.
	StatefulSetName string
	Replicas        int32
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

// MasterHostname is the pod hostname given to the master's pod (the Job's pods get no stable
// name by themselves; with hostname and subdomain set, DNS gives them one).
func (s *Spec) MasterHostname() string { return s.Master.JobName }

// WorkerHostnames lists the pod hostnames of a worker set, in ordinal order.
func (ws *WorkerSet) WorkerHostnames() []string {
	names := make([]string, 0, ws.Replicas)
	for i := range ws.Replicas {
		names = append(names, podOrdinalName(ws.StatefulSetName, i))
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
