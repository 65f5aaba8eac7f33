package webhooks

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
)

// programPaths are where the parts of an MPI program are written in a job's spec, for error
// messages: under spec.worker and spec.launcher, or in an MPIJob of the FFFFFaraway form at
// spec.numWorkers, spec.workerTemplate and spec.launcherTemplate.
type programPaths struct {
	workerReplicas, workerSlots, workerTemplate, workerCmd, launcher, launcherTemplate *field.Path
	// launcherAlone: the job may have no workers (kubeflow's form).
	launcherAlone bool
}

// workerFormPaths are the paths of the spec.worker form (T9k's; HorovodJob's only form).
func workerFormPaths() programPaths {
	worker, launcher := field.NewPath("spec", "worker"), field.NewPath("spec", "launcher")
	return programPaths{
		workerReplicas: worker.Child("replicas"), workerSlots: worker.Child("slots"),
		workerTemplate: worker.Child("template"), workerCmd: worker.Child("cmd"),
		launcher: launcher, launcherTemplate: launcher.Child("template"),
	}
}

// workerTemplateFormPaths are the paths of an MPIJob written in the FFFFFaraway form.
func workerTemplateFormPaths() programPaths {
	spec := field.NewPath("spec")
	return programPaths{
		workerReplicas: spec.Child("numWorkers"), workerSlots: spec.Child("workerTemplate"),
		workerTemplate: spec.Child("workerTemplate"), workerCmd: spec.Child("launcherTemplate"),
		launcher: spec.Child("launcherTemplate"), launcherTemplate: spec.Child("launcherTemplate"),
	}
}

// kubeflowFormPaths are the paths of an MPIJob written in kubeflow's form.
func kubeflowFormPaths() programPaths {
	specs := field.NewPath("spec", "mpiReplicaSpecs")
	worker, launcher := specs.Child("Worker"), specs.Child("Launcher")
	return programPaths{
		workerReplicas: worker.Child("replicas"), workerSlots: field.NewPath("spec", "slotsPerWorker"),
		workerTemplate: worker.Child("template"), workerCmd: launcher.Child("template"),
		launcher: launcher, launcherTemplate: launcher.Child("template"), launcherAlone: true,
	}
}

// validateMPIProgram returns every problem of what MPIJob and HorovodJob share; at names where
// its parts are written.
func validateMPIProgram(name string, p *troupev1.MPIProgramSpec, mainContainer string, at programPaths) field.ErrorList {
	spec := field.NewPath("spec")
	replicas := ptr.Deref(p.Worker.Replicas, 1)
	errs := validateJobName(name, troupev1.MPIProgramDerivedNames)

	if !at.launcherAlone || replicas > 0 {
		errs = append(errs, validateReplicas(at.workerReplicas, replicas)...)
	}
	errs = append(errs, validateSlots(at.workerSlots, p.Worker.Slots, &p.Worker.Template, mainContainer)...)
	if !at.launcherAlone || replicas > 0 || len(p.Worker.Template.Spec.Containers) > 0 {
		errs = append(errs, validateTemplate(at.workerTemplate, &p.Worker.Template, workerPod, mainContainer)...)
	}
	if l := p.Launcher; l != nil {
		if l.Template != nil {
			errs = append(errs, validateTemplate(at.launcherTemplate, l.Template, launcherPod, "")...)
		}
		errs = append(errs, validateJobLimits(at.launcher, l.BackoffLimit, l.ActiveDeadlineSeconds)...)
	}
	if len(p.Worker.Cmd) == 0 && (p.Launcher == nil || p.Launcher.Template == nil) {
		errs = append(errs, field.Required(at.workerCmd,
			"nothing to run: give the program in worker.cmd (the operator builds the launcher) or a launcher.template"))
	}
	impl := mpi.Implementation(p.MPIImplementation)
	if _, err := mpi.DialectFor(impl); err != nil {
		errs = append(errs, field.NotSupported(spec.Child("mpiImplementation"), p.MPIImplementation, mpi.Implementations()))
	}
	if len(p.MCA) > 0 && !impl.IsOpenMPI() {
		errs = append(errs, field.Forbidden(spec.Child("mca"),
			fmt.Sprintf("MCA parameters are Open MPI's; %s does not read them", p.MPIImplementation)))
	}
	errs = append(errs, validateMCA(spec.Child("mca"), p.MCA)...)
	if p.MPIHome != "" && !path.IsAbs(p.MPIHome) {
		errs = append(errs, field.Invalid(spec.Child("mpiHome"), p.MPIHome, "must be an absolute path"))
	}
	errs = append(errs, validateLaunch(spec, &p.MPILaunch)...)
	errs = append(errs, validateUserInputs(spec, p.AppCodesToSync, &p.MPILaunch, troupev1.MPITransportSSH, mpiTemplates(p, at))...)
	errs = append(errs, validateRunPolicy(spec.Child("runPolicy"), &p.RunPolicy,
		jobReplicas{master: string(troupev1.ReplicaLauncher), workers: []string{troupev1.MPIWorkerSetName}})...)
	errs = append(errs, validateSchedulingPolicy(spec.Child("schedulingPolicy"), &p.SchedulingPolicy, int64(replicas)+1, "launcher")...)
	errs = append(errs, validateRunMode(spec.Child("runMode"), p.RunMode, mpiReplicaTypes)...)
	errs = append(errs, validateT9kScheduler(spec, p)...)
	return errs
}

// validateMPIProgramUpdate refuses changes to what is fixed once the job exists: the templates
// (but see validateTemplateUpdate), the program, the MPI implementation, the transport and the
// gang provider. The worker replicas, suspend and the TTL may change.
func validateMPIProgramUpdate(o, n *troupev1.MPIProgramSpec, at programPaths) field.ErrorList {
	spec := field.NewPath("spec")
	suspended := wasSuspended(o.RunPolicy)
	var errs field.ErrorList
	errs = append(errs, immutable(spec.Child("mpiImplementation"), o.MPIImplementation, n.MPIImplementation)...)
	errs = append(errs, immutable(spec.Child("transport"), o.Transport, n.Transport)...)
	errs = append(errs, immutable(spec.Child("schedulingPolicy", "gang"), ptr.Deref(o.SchedulingPolicy.Gang, ""), ptr.Deref(n.SchedulingPolicy.Gang, ""))...)
	errs = append(errs, validateTemplateUpdate(at.workerTemplate, &o.Worker.Template, &n.Worker.Template, suspended)...)
	// The generated launcher is made of these; a batch Job's template cannot change.
	errs = append(errs, unchanged(spec.Child("worker", "cmd"), o.Worker.Cmd, n.Worker.Cmd)...)
	errs = append(errs, unchanged(spec.Child("worker", "extraMPIArgs"), o.Worker.ExtraMPIArgs, n.Worker.ExtraMPIArgs)...)
	errs = append(errs, unchanged(spec.Child("mca"), o.MCA, n.MCA)...)
	errs = append(errs, immutable(spec.Child("mpiHome"), o.MPIHome, n.MPIHome)...)
	errs = append(errs, unchanged(spec.Child("ssh"), o.SSH, n.SSH)...)
	errs = append(errs, validateRunModeUpdate(spec.Child("runMode"), o.RunMode, n.RunMode)...)
	errs = append(errs, unchanged(spec.Child("appCodesToSync"), o.AppCodesToSync, n.AppCodesToSync)...)
	errs = append(errs, fixedRunPolicyUpdate(spec, &o.RunPolicy, &n.RunPolicy)...)
	oldLaunch, newLaunch := launcherTemplate(o), launcherTemplate(n)
	switch {
	case (oldLaunch == nil) != (newLaunch == nil):
		errs = append(errs, field.Forbidden(at.launcherTemplate, "cannot be added or removed once the job exists"))
	case oldLaunch != nil:
		errs = append(errs, validateTemplateUpdate(at.launcherTemplate, oldLaunch, newLaunch, suspended)...)
	}
	return errs
}

func launcherTemplate(p *troupev1.MPIProgramSpec) *corev1.PodTemplateSpec {
	if p.Launcher == nil {
		return nil
	}
	return p.Launcher.Template
}
