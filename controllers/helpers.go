package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/pkg/gang"
)

// Options are the operator-wide settings the adapters need.
type Options struct {
	// AgentImage is the troupe-agent image of launchers' wait init containers.
	AgentImage string
	// DefaultGang is the gang provider of jobs that name none ("" is None).
	DefaultGang troupev1.GangProvider
	// VolcanoScheduler and CoschedulingScheduler are the schedulers' names pods are given.
	VolcanoScheduler      string
	CoschedulingScheduler string
	// AvailableGangs are the providers whose PodGroup CRD the cluster serves; a job asking
	// for another one is reported, not run.
	AvailableGangs map[troupev1.GangProvider]bool
}

// ownedTypes are the PodGroup types of the available gang providers, watched as children.
func (o Options) ownedTypes() []client.Object { return GangTypes(o.AvailableGangs) }

// gangFor is the gang provider of a job's scheduling policy.
func gangFor(sp troupev1.SchedulingPolicy, o Options) (engine.Gang, error) {
	provider := ptr.Deref(sp.Gang, o.DefaultGang)
	if provider == "" || provider == troupev1.GangNone {
		return nil, nil
	}
	if !o.AvailableGangs[provider] {
		return nil, &engine.SpecError{Reason: troupev1.ReasonGangUnavailable, Err: fmt.Errorf(
			"spec.schedulingPolicy.gang: %s is not installed in this cluster (its PodGroup CRD is missing); install it or choose another gang provider", provider)}
	}
	switch provider {
	case troupev1.GangVolcano:
		return gang.Volcano{SchedulerName: o.VolcanoScheduler}, nil
	case troupev1.GangCoscheduling:
		return gang.Coscheduling{SchedulerName: o.CoschedulingScheduler}, nil
	}
	return nil, fmt.Errorf("spec.schedulingPolicy.gang: unsupported value %q", provider)
}

// Setup registers the engine's reconciler for an adapter's kind with the manager.
func Setup(mgr ctrl.Manager, a engine.Adapter, o Options) error {
	r, err := engine.NewReconciler(mgr, a, o.ownedTypes()...)
	if err != nil {
		return err
	}
	return r.SetupWithManager(mgr)
}

// masterOf describes a kind's master (launcher) Job: its own limits win over the run policy's.
func masterOf(jobName string, tmpl corev1.PodTemplateSpec, backoffLimit *int32, deadline *int64, rp troupev1.RunPolicy) engine.Master {
	return engine.Master{
		JobName:               jobName,
		Template:              tmpl,
		BackoffLimit:          firstSet(troupev1.DefaultBackoffLimit, backoffLimit, rp.BackoffLimit),
		ActiveDeadlineSeconds: firstNonNil(deadline, rp.ActiveDeadlineSeconds),
	}
}

// sharedRunPolicy maps the T9k spelling cleanUpWorkers onto cleanPodPolicy (the CRD refuses
// the two when they disagree; cleanPodPolicy wins for objects stored before that rule).
func sharedRunPolicy(rp troupev1.RunPolicy) troupev1.RunPolicy {
	if rp.CleanPodPolicy == nil && rp.CleanUpWorkers != nil {
		p := troupev1.CleanPodPolicyNone
		if *rp.CleanUpWorkers {
			p = troupev1.CleanPodPolicyRunning
		}
		rp.CleanPodPolicy = &p
	}
	return rp
}

// mpiBackend builds the MPI backend of a job from its launch settings; def is the kind's
// default transport.
func mpiBackend(l troupev1.MPILaunch, def troupev1.MPITransport, agentImage string) (mpi.Backend, error) {
	b := mpi.Backend{AgentImage: agentImage, WaitTimeoutSeconds: ptr.Deref(l.WaitForWorkersTimeoutSeconds, 0)}
	transport := l.Transport
	if transport == "" {
		transport = def
	}
	switch transport {
	case troupev1.MPITransportSSH:
		t := mpi.SSH{}
		if l.SSH != nil {
			t.SSHDPath = l.SSH.SSHDPath
			t.Port = ptr.Deref(l.SSH.Port, 0)
			t.SecretName = l.SSH.SecretName
		}
		b.Transport = t
	case troupev1.MPITransportKubeExec:
		b.Transport = mpi.KubeExec{}
	default:
		return b, fmt.Errorf("spec.transport: unsupported value %q: use %q or %q", transport, troupev1.MPITransportSSH, troupev1.MPITransportKubeExec)
	}
	return b, nil
}

// requireMainContainer checks that a template has the kind's main container. The CRD refuses
// such specs already; this guards objects stored before the rule existed.
func requireMainContainer(path string, tmpl *corev1.PodTemplateSpec, name string) error {
	for _, c := range tmpl.Spec.Containers {
		if c.Name == name {
			return nil
		}
	}
	return fmt.Errorf("%s.spec.containers: must contain a container named %q", path, name)
}

// firstSet returns the first non-nil value, else def.
func firstSet[T any](def T, vals ...*T) T {
	for _, v := range vals {
		if v != nil {
			return *v
		}
	}
	return def
}

// firstNonNil returns the first non-nil pointer, or nil.
func firstNonNil[T any](vals ...*T) *T {
	for _, v := range vals {
		if v != nil {
			return v
		}
	}
	return nil
}
