package controllers

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// MPIJobNameLabel names the MPIJob on every child and pod.
const MPIJobNameLabel = "mpijob.troupe.dev/name"

// mpiWorkerSet is the name of an MPIJob's one worker set (label troupe.dev/worker-set).
const mpiWorkerSet = "worker"

// MPIJob adapts MPIJob to the engine: a launcher Job <job>-launcher that only launches (it is
// not a host of the hostfile) and one worker StatefulSet <job>-worker.
type MPIJob struct {
	Options
}

var _ engine.Adapter = MPIJob{}

// SetupMPIJob registers the MPIJob reconciler with the manager.
func SetupMPIJob(mgr ctrl.Manager, opts Options) error {
	r, err := engine.NewReconciler(mgr, MPIJob{Options: opts})
	if err != nil {
		return err
	}
	return r.SetupWithManager(mgr)
}

// NewObject returns an empty MPIJob.
func (MPIJob) NewObject() engine.Object { return &troupev1.MPIJob{} }

// NameLabel is the MPIJob name label.
func (MPIJob) NameLabel() string { return MPIJobNameLabel }

// Describe turns an MPIJob into the engine's Spec.
func (a MPIJob) Describe(obj engine.Object, s *engine.Spec) error {
	job, ok := obj.(*troupev1.MPIJob)
	if !ok {
		return fmt.Errorf("expected an MPIJob, got %T", obj)
	}
	spec := &job.Spec
	if err := requireMainContainer("spec.worker.template", &spec.Worker.Template, troupev1.MPIWorkerContainer); err != nil {
		return err
	}
	dialect, err := mpi.DialectFor(mpi.Implementation(spec.MPIImplementation))
	if err != nil {
		return fmt.Errorf("spec.mpiImplementation: %w", err)
	}
	if len(spec.MCA) > 0 && dialect.Implementation != mpi.OpenMPI && dialect.Implementation != mpi.OpenMPI5 {
		return fmt.Errorf("spec.mca: MCA parameters are Open MPI's; %s does not read them", dialect.Implementation)
	}
	backend, err := mpiBackend(spec.MPILaunch, troupev1.MPITransportSSH, a.AgentImage)
	if err != nil {
		return err
	}
	backend.Dialect = dialect

	launcher := spec.Launcher
	if launcher == nil {
		launcher = &troupev1.MPILauncher{}
	}
	tmpl := generatedLauncher(spec, dialect)
	if launcher.Template != nil {
		tmpl = *launcher.Template
	}
	s.MainContainer = troupev1.MPIWorkerContainer
	s.RunPolicy = sharedRunPolicy(spec.RunPolicy)
	s.SchedulingPolicy = spec.SchedulingPolicy
	s.Master = masterOf(job.Name+"-launcher", tmpl, launcher.BackoffLimit, launcher.ActiveDeadlineSeconds, spec.RunPolicy)
	s.Backend = backend
	if backend.AgentImage != "" {
		s.Master.PodFailurePolicy = mpi.WaitFailurePolicy(&tmpl)
	}

	worker := *spec.Worker.Template.DeepCopy()
	if _, isSSH := backend.Transport.(mpi.SSH); isSSH {
		// The processes come from the launcher; the worker container only has to accept it.
		for i := range worker.Spec.Containers {
			if c := &worker.Spec.Containers[i]; c.Name == troupev1.MPIWorkerContainer {
				c.Command, c.Args = nil, nil
			}
		}
	}
	s.WorkerSets = []engine.WorkerSet{{
		Name:            mpiWorkerSet,
		StatefulSetName: job.Name + "-worker",
		Replicas:        ptr.Deref(spec.Worker.Replicas, 1),
		Slots:           mpi.Slots(&worker, troupev1.MPIWorkerContainer, spec.Worker.Slots),
		Template:        worker,
	}}
	return nil
}

// generatedLauncher builds the launcher pod from the worker's: the worker image, working
// directory and environment, without its GPUs (the launcher only launches), running the
// dialect's launcher with the MCA parameters, extraMPIArgs and cmd.
func generatedLauncher(spec *troupev1.MPIJobSpec, d mpi.Dialect) corev1.PodTemplateSpec {
	tmpl := *spec.Worker.Template.DeepCopy()
	var worker corev1.Container
	for _, c := range tmpl.Spec.Containers {
		if c.Name == troupev1.MPIWorkerContainer {
			worker = c
		}
	}
	tmpl.Spec.Containers = []corev1.Container{{
		Name:            troupev1.MPILauncherContainer,
		Image:           worker.Image,
		ImagePullPolicy: worker.ImagePullPolicy,
		WorkingDir:      worker.WorkingDir,
		Env:             worker.Env,
		EnvFrom:         worker.EnvFrom,
		VolumeMounts:    worker.VolumeMounts,
		SecurityContext: worker.SecurityContext,
		Command:         LauncherCommand(spec, d),
	}}
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return tmpl
}

// LauncherCommand is the generated launcher's command line: the dialect's launcher, Open MPI's
// --prefix from mpiHome, each MCA parameter (sorted, so the command is stable), extraMPIArgs,
// then cmd. The hostfile and the remote agent come from the environment.
func LauncherCommand(spec *troupev1.MPIJobSpec, d mpi.Dialect) []string {
	cmd := []string{d.Launcher}
	openMPI := d.Implementation == mpi.OpenMPI || d.Implementation == mpi.OpenMPI5
	if spec.MPIHome != "" && openMPI {
		cmd = append(cmd, "--prefix", spec.MPIHome)
	}
	for _, k := range slices.Sorted(maps.Keys(spec.MCA)) {
		cmd = append(cmd, "--mca", k, spec.MCA[k])
	}
	cmd = append(cmd, spec.Worker.ExtraMPIArgs...)
	return append(cmd, spec.Worker.Cmd...)
}
