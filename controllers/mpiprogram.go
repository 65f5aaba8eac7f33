package controllers

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	"github.com/troupe-dev/troupe/pkg/engine"
	"github.com/troupe-dev/troupe/pkg/queue/kueue"
)

// mpiProgram describes the launcher and workers every MPIProgramSpec kind (MPIJob, HorovodJob)
// shares: a launcher Job <job>-launcher that only launches (it is not a host of the hostfile),
// one worker StatefulSet <job>-worker whose main container is mainContainer, the MPI backend
// of the spec's dialect and transport. p is defaulted (see defaulted). launch builds the
// command of a launcher the operator generates, from the dialect, the backend and the worker
// set; the kinds differ there.
func mpiProgram(job engine.Object, p *troupev1.MPIProgramSpec, mainContainer string, form mpiForm, o Options, s *engine.Spec,
	launch func(mpi.Dialect, mpi.Backend, *engine.WorkerSet) []string) error {
	workers := *p.Worker.Replicas
	dialect, err := mpi.DialectFor(mpi.Implementation(p.MPIImplementation))
	if err != nil {
		return fmt.Errorf("spec.mpiImplementation: %w", err)
	}
	if err := describePolicies(s, p.RunPolicy, p.SchedulingPolicy, mainContainer, o); err != nil {
		return err
	}
	backend, err := form.backend(p.MPILaunch, o.AgentImage)
	if err != nil {
		return err
	}
	backend.Dialect = dialect
	s.RunMode = runModeOf(p.RunMode, troupev1.ReplicaLauncher, p.Transport)
	// In debug mode workers may run anything: the launcher comes up even if they cannot be
	// reached.
	backend.WaitBestEffort = s.RunMode.Debug != nil

	worker := *p.Worker.Template.DeepCopy()
	if _, isSSH := backend.Transport.(mpi.SSH); isSSH {
		// The processes come from the launcher; the worker container only has to accept it.
		for i := range worker.Spec.Containers {
			if c := &worker.Spec.Containers[i]; c.Name == mainContainer {
				c.Command, c.Args = nil, nil
			}
		}
	}
	if workers > 0 || form.kubeflow == nil { // kubeflow's form may run its launcher alone
		s.WorkerSets = []engine.WorkerSet{{
			Name:          troupev1.MPIWorkerSetName,
			ChildName:     troupev1.MPIWorkerStatefulSet.For(job.GetName()),
			TemplateField: form.workerTemplatePath(),
			Replicas:      workers,
			Slots:         *p.Worker.Slots,
			Template:      worker,
		}}
	}

	launcher := *p.Launcher
	var tmpl corev1.PodTemplateSpec
	launcherField := form.launcherTemplatePath()
	if launcher.Template != nil {
		tmpl = *launcher.Template.DeepCopy()
	} else {
		tmpl = generatedLauncher(&p.Worker.Template, mainContainer, launch(dialect, backend, &s.WorkerSets[0]))
		launcherField = form.workerTemplatePath() // its volumes are the worker's
	}
	s.Master = masterOf(troupev1.MPILauncherJob.For(job.GetName()), tmpl, launcher.BackoffLimit, launcher.ActiveDeadlineSeconds)
	s.Master.TemplateField = launcherField
	s.Master.IsHost = form.launcherIsHost
	s.Master.Slots = *p.Worker.Slots // a launcher that computes runs as many ranks as a worker
	s.Master.AfterWorkersReady = form.launcherAfterWorkersReady
	s.Backend = backend
	if backend.AgentImage != "" {
		s.Master.PodFailurePolicy = mpi.WaitFailurePolicy(&tmpl)
	}
	if form.kubeflow != nil && form.kubeflow.LauncherRestartPolicy == troupev1.ReplicaRestartExitCode {
		s.Master.PodFailurePolicy = engine.ExitCodeFailurePolicy(s.Master.PodFailurePolicy, &tmpl, mainContainer)
	}
	hint := scaleSubresourceHint(resourceOf(job), job.GetName())
	if mj, ok := job.(*troupev1.MPIJob); ok && mj.Spec.IsWorkerTemplateForm() {
		hint = numWorkersHint(job.GetName())
	} else if ok && mj.Spec.IsKubeflowForm() {
		hint = kubeflowWorkersHint(job.GetName())
	}
	describeUserInputs(s, p.AppCodesToSync, o, hint)
	return nil
}

// mpiForm is what the way an MPIJob is written asks beyond the program it describes: the
// launcher as a host, its creation once the workers are Ready, kubeflow's runtime contract.
// HorovodJob has none of it (the zero value).
type mpiForm struct {
	launcherIsHost, launcherAfterWorkersReady bool
	kubeflow                                  *troupev1.KubeflowContract
	// templateFields: an MPIJob of the FFFFFaraway form (spec.workerTemplate,
	// spec.launcherTemplate).
	templateFields bool
}

// workerTemplatePath is where the worker template is written, for errors.
func (f mpiForm) workerTemplatePath() string {
	switch {
	case f.kubeflow != nil:
		return "spec.mpiReplicaSpecs.Worker.template"
	case f.templateFields:
		return "spec.workerTemplate"
	}
	return "spec.worker.template"
}

// launcherTemplatePath is where a launcher template is written, for errors.
func (f mpiForm) launcherTemplatePath() string {
	switch {
	case f.kubeflow != nil:
		return "spec.mpiReplicaSpecs.Launcher.template"
	case f.templateFields:
		return "spec.launcherTemplate"
	}
	return "spec.launcher.template"
}

// backend is the MPI backend of the launch settings, with kubeflow's transport and layout for
// a job in kubeflow's form (unless it asks for KubeExec, which keeps kubeflow's layout).
func (f mpiForm) backend(l troupev1.MPILaunch, agentImage string) (mpi.Backend, error) {
	if f.kubeflow == nil {
		return mpiBackend(l, agentImage)
	}
	b := mpi.Backend{AgentImage: agentImage, WaitTimeoutSeconds: *l.WaitForWorkersTimeoutSeconds,
		KubeflowLayout: true, DiscoverHosts: true}
	switch l.Transport {
	case "":
		b.Transport = mpi.KubeflowSSH{MountPath: f.kubeflow.SSHAuthMountPath}
	case troupev1.MPITransportKubeExec:
		b.Transport = mpi.KubeExec{}
	default:
		return b, fmt.Errorf("spec.transport: unsupported value %q in kubeflow's form: leave it unset, or use %q", l.Transport, troupev1.MPITransportKubeExec)
	}
	return b, nil
}

// generatedLauncher builds the launcher pod from the worker's: the worker image, working
// directory and environment, without its GPUs (the launcher only launches), running command.
func generatedLauncher(workerTmpl *corev1.PodTemplateSpec, mainContainer string, command []string) corev1.PodTemplateSpec {
	tmpl := *workerTmpl.DeepCopy()
	topologyMarksForLauncher(&tmpl)
	var worker corev1.Container
	for _, c := range tmpl.Spec.Containers {
		if c.Name == mainContainer {
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
		Command:         command,
		// mpirun (or horovodrun) only starts the remote processes and relays their output; a
		// launcher that needs more is written as launcher.template.
		Resources: engine.InjectedResources("100m", "256Mi", "2", "2Gi"),
	}}
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return tmpl
}

// topologyMarksForLauncher turns what asks Kueue's topology-aware scheduling (TAS) to place
// the workers, copied into a launcher built from their template, into the same for the
// launcher's own pod set: TAS's ungater finds pods by their pod set label, and would take the
// launcher for one more worker. A worker topology level becomes "unconstrained" (the Workload
// asks the same, so the launcher's pod set is placed by TAS whenever the workers' is), and the
// Workload annotation and scheduling gate stay: the ungater gives the launcher its node.
func topologyMarksForLauncher(t *corev1.PodTemplateSpec) {
	tas := false
	for _, k := range []string{kueuev1.PodSetRequiredTopologyAnnotation, kueuev1.PodSetPreferredTopologyAnnotation,
		kueuev1.PodSetUnconstrainedTopologyAnnotation, kueuev1.PodSetSliceRequiredTopologyAnnotation, kueuev1.PodSetSliceSizeAnnotation} {
		if _, ok := t.Annotations[k]; ok {
			tas = true
			delete(t.Annotations, k)
		}
	}
	if tas {
		t.Annotations[kueuev1.PodSetUnconstrainedTopologyAnnotation] = "true"
	}
	if _, ok := t.Labels[kueue.LabelPodSet]; ok {
		t.Labels[kueue.LabelPodSet] = troupev1.PodSetLauncher
	}
}

// mpirunCommand is a generated launcher's command line: the dialect's launcher, Open MPI's
// --prefix from mpiHome, each MCA parameter (sorted, so the command is stable), extraMPIArgs,
// then cmd. The hostfile and the remote agent come from the environment.
func mpirunCommand(p *troupev1.MPIProgramSpec, d mpi.Dialect) []string {
	cmd := []string{d.Launcher}
	if p.MPIHome != "" && d.Implementation.IsOpenMPI() {
		cmd = append(cmd, "--prefix", p.MPIHome)
	}
	for _, k := range slices.Sorted(maps.Keys(p.MCA)) {
		cmd = append(cmd, "--mca", k, p.MCA[k])
	}
	cmd = append(cmd, p.Worker.ExtraMPIArgs...)
	return append(cmd, p.Worker.Cmd...)
}
