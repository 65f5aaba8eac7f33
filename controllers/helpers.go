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
	// RequireGitKnownHosts requires the key known_hosts in every git deploy-key Secret
	// (appCodesToSync[].gitSecretName), so that no clone accepts an unknown server's host key.
	RequireGitKnownHosts bool
	// ContainerRestartRules says the cluster keeps containers' restart rules (KEP-5307), so a
	// master whose exit codes rules act on restarts in place for the other codes
	// (engine.Spec.ContainerRestartRules).
	ContainerRestartRules bool
	// AllowClaimVolumeSources lets claims of runPolicy.storage name the volume they come from
	// (volumeName, dataSource, dataSourceRef); off, the engine refuses such a job.
	AllowClaimVolumeSources bool
	// LostNodes is how pods on nodes that stopped answering are treated (the zero value:
	// nodes are not read).
	LostNodes engine.LostNodePolicy
	// Progress is the progress endpoint the jobs' pods report to (docs/progress.md); nil: the
	// operator serves none, and the pods are not wired to one.
	Progress *engine.ProgressEndpoint
}

// ownedTypes are the PodGroup types of the available gang providers, watched as children.
func (o Options) ownedTypes() []client.Object { return GangTypes(o.AvailableGangs) }

// gangFor is the gang provider of a defaulted job's scheduling policy ("" or None: no gang).
func gangFor(sp troupev1.SchedulingPolicy, o Options) (engine.Gang, error) {
	provider := ptr.Deref(sp.Gang, "")
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
	r.HandleLostNodes(o.LostNodes)
	if o.Progress != nil {
		r.ReportProgress(*o.Progress)
	}
	return r.SetupWithManager(mgr)
}

// masterOf describes a kind's master (launcher) Job from its defaulted limits (the run
// policy's are folded into them by defaulting).
func masterOf(jobName string, tmpl corev1.PodTemplateSpec, backoffLimit *int32, deadline *int64) engine.Master {
	return engine.Master{
		JobName:               jobName,
		Template:              tmpl,
		BackoffLimit:          *backoffLimit,
		ActiveDeadlineSeconds: deadline,
	}
}

// mpiBackend builds the MPI backend of a job from its defaulted launch settings.
func mpiBackend(l troupev1.MPILaunch, agentImage string) (mpi.Backend, error) {
	b := mpi.Backend{AgentImage: agentImage, WaitTimeoutSeconds: *l.WaitForWorkersTimeoutSeconds}
	transport := l.Transport
	switch transport {
	case troupev1.MPITransportSSH:
		b.Transport = mpi.SSH{SSHDPath: l.SSH.SSHDPath, Port: *l.SSH.Port, SecretName: l.SSH.SecretName}
	case troupev1.MPITransportKubeExec:
		b.Transport = mpi.KubeExec{}
	default:
		return b, fmt.Errorf("spec.transport: unsupported value %q: use %q or %q", transport, troupev1.MPITransportSSH, troupev1.MPITransportKubeExec)
	}
	return b, nil
}
