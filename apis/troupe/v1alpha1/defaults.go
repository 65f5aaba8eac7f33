package v1alpha1

import (
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Defaulting. Every default a job gets lives here, one SetDefaults per kind. The defaulting
// webhook calls it to write the defaults into the stored spec (so that kubectl get -o yaml shows
// what the job runs with), and each kind's adapter calls it on its copy of the job before
// reading it, so that a job stored without its defaults (written while the webhook was down, or
// before a default existed) is built exactly as the defaulted job is. The adapters hold no
// default of their own: a default changed here changes both, and cannot drift between them.
//
// Only one default is not fixed by the job: the gang provider of a job that names none, which
// the operator's --default-gang flag chooses. It is a parameter (OperatorDefaults) rather than a
// webhook-only step, so that the rule "no gang named: the operator's default" is written once
// too; the webhook and the adapters fill it from the same flag.
//
// Every SetDefaults is idempotent: defaulting a defaulted job changes nothing, which is what
// makes the adapter's build of a stored job independent of whether the webhook saw it.

// OperatorDefaults are the defaults the operator's configuration, not the job, decides.
// +kubebuilder:object:generate=false
type OperatorDefaults struct {
	// Gang is the gang provider of jobs that name none; "" leaves schedulingPolicy.gang unset,
	// which runs the job without a gang.
	Gang GangProvider
}

const (
	// DefaultBackoffLimit is a master's (launcher's) retries when neither it nor the run policy
	// sets them: the batch Job default.
	DefaultBackoffLimit int32 = 6
	// DefaultWorkerRestartLimit is runPolicy.workerRestartLimit of a job with workers (not an
	// elastic HorovodJob's): the kubelet's back-off (10 s, 20 s, 40 s) makes three restarts
	// about 70 s, well within the launcher's 300 s wait.
	DefaultWorkerRestartLimit int32 = 3
	// DefaultSSHPort is above 1024 so that sshd can listen as a non-root user.
	DefaultSSHPort int32 = 2222
	// DefaultSSHDPath is where Debian and most images install sshd.
	DefaultSSHDPath = "/usr/sbin/sshd"
	// DefaultWaitForWorkersTimeoutSeconds bounds the launcher's wait for its workers when the
	// spec does not.
	DefaultWaitForWorkersTimeoutSeconds int32 = 300
	// DefaultMPIImplementation is the MPI of MPIJob and HorovodJob images that name none.
	DefaultMPIImplementation MPIImplementation = "OpenMPI"
	// ResourceGPU is NVIDIA's GPU resource, the most common accelerator (see IsAccelerator).
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
)

// acceleratorResources are the device plugins' resources that count accelerators but do not
// end in /gpu: Intel's GPUs, Habana's Gaudi, AWS's Neuron devices and cores, Google's TPUs.
var acceleratorResources = map[corev1.ResourceName]bool{
	"gpu.intel.com/i915": true, "gpu.intel.com/xe": true, "habana.ai/gaudi": true,
	"aws.amazon.com/neuron": true, "aws.amazon.com/neuroncore": true, "google.com/tpu": true,
}

// IsAccelerator says whether a resource counts accelerators, one MPI rank each: any vendor's
// <domain>/gpu (nvidia.com/gpu, amd.com/gpu, ...), NVIDIA's MIG slices (nvidia.com/mig-*), and
// the device plugins' accelerators that are named otherwise (acceleratorResources).
func IsAccelerator(name corev1.ResourceName) bool {
	domain, resource, ok := strings.Cut(string(name), "/")
	switch {
	case !ok || domain == "" || strings.HasSuffix(domain, "kubernetes.io"):
		return false
	case resource == "gpu", domain == "nvidia.com" && strings.HasPrefix(resource, "mig-"):
		return true
	}
	return acceleratorResources[name]
}

// SlotsFromTemplate is the default MPI slots of a pod: the accelerators its main container is
// limited to (the largest such limit, IsAccelerator), else 1.
func SlotsFromTemplate(tmpl *corev1.PodTemplateSpec, mainContainer string) int32 {
	slots := int64(1)
	for _, c := range tmpl.Spec.Containers {
		if c.Name != mainContainer {
			continue
		}
		for name, q := range c.Resources.Limits {
			if IsAccelerator(name) && q.Value() > slots {
				slots = q.Value()
			}
		}
	}
	// Found by fuzzing: a limit beyond int32 must not wrap to a negative count.
	return int32(min(slots, math.MaxInt32))
}

// SetDefaults fills a ChainerJob's defaults. A job of backend none runs its master alone: it
// gets no transport, worker or slots defaults.
func (j *ChainerJob) SetDefaults(o OperatorDefaults) {
	s := &j.Spec
	if s.Backend == "" {
		s.Backend = ChainerBackendMPI
	}
	setPolicyDefaults(&s.RunPolicy, &s.SchedulingPolicy, o)
	setJobLimitDefaults(&s.Master.BackoffLimit, &s.Master.ActiveDeadlineSeconds, &s.RunPolicy)
	if s.Backend != ChainerBackendMPI {
		return
	}
	setLaunchDefaults(&s.MPILaunch, MPITransportKubeExec)
	setWorkerRestartLimit(&s.RunPolicy)
	s.Master.MPIConfig = slotsDefault(s.Master.MPIConfig, &s.Master.Template)
	for name, ws := range s.WorkerSets {
		if ws.Replicas == nil {
			ws.Replicas = ptr.To[int32](1)
		}
		ws.MPIConfig = slotsDefault(ws.MPIConfig, &ws.Template)
		s.WorkerSets[name] = ws
	}
}

// slotsDefault fills a ChainerJob pod set's slots from its template.
func slotsDefault(c *MPIConfig, tmpl *corev1.PodTemplateSpec) *MPIConfig {
	if c == nil {
		c = &MPIConfig{}
	}
	if c.Slots == nil {
		c.Slots = ptr.To(SlotsFromTemplate(tmpl, ChainerMainContainer))
	}
	return c
}

// SetDefaults fills an MPIJob's defaults. A job of the FFFFFaraway form keeps its form: its
// defaults go to its own fields (numWorkers) and the shared ones, never to spec.worker or
// spec.launcher (ProgramWithDefaults fills those in the program it runs as), and its transport
// is KubeExec (its workers run their own command, not sshd).
func (j *MPIJob) SetDefaults(o OperatorDefaults) {
	s := &j.Spec
	if s.IsKubeflowForm() {
		s.setKubeflowDefaults()
		// The transport stays unset (kubeflow's SSH, or KubeExec). runPolicy.schedulingPolicy
		// is not copied into spec.schedulingPolicy: the program folds it in (Program), so a
		// later change of it is not shadowed by an earlier copy.
		s.setPolicyDefaults("", o)
		if s.LauncherCreationPolicy == "" {
			s.LauncherCreationPolicy = LauncherAtStartup
		}
		setWorkerRestartLimit(&s.RunPolicy)
		return
	}
	if !s.IsWorkerTemplateForm() {
		s.setDefaults(MPIWorkerContainer, o)
		setWorkerRestartLimit(&s.RunPolicy)
		return
	}
	if s.NumWorkers == nil {
		s.NumWorkers = ptr.To[int32](1)
	}
	s.setPolicyDefaults(MPITransportKubeExec, o)
	setWorkerRestartLimit(&s.RunPolicy)
}

// ProgramWithDefaults is Program with the worker's and launcher's defaults filled in the
// program, as SetDefaults fills them in a job of the spec.worker form: so a job of either form,
// defaulted, is run by the same program. Call it on a defaulted job.
func (s *MPIJobSpec) ProgramWithDefaults() (p MPIProgramSpec, mainContainer string) {
	p, mainContainer = s.Program()
	p.setWorkerDefaults(mainContainer)
	return p, mainContainer
}

// SetDefaults fills a HorovodJob's defaults: an elastic job without a worker count starts with
// its minimum, and has no worker restart limit (it trains on with the workers that run).
func (j *HorovodJob) SetDefaults(o OperatorDefaults) {
	if e := j.Spec.Elastic; e != nil && j.Spec.Worker.Replicas == nil {
		j.Spec.Worker.Replicas = ptr.To(e.MinReplicas)
	}
	j.Spec.setDefaults(HorovodMainContainer, o)
	if j.Spec.Elastic == nil {
		setWorkerRestartLimit(&j.Spec.RunPolicy)
	}
}

// setWorkerRestartLimit fills runPolicy.workerRestartLimit of a job whose workers must all run.
func setWorkerRestartLimit(rp *RunPolicy) {
	if rp.WorkerRestartLimit == nil {
		rp.WorkerRestartLimit = ptr.To(DefaultWorkerRestartLimit)
	}
}

// setDefaults fills what MPIJob and HorovodJob share, for a program of the spec.worker form
// whose workers' main container is mainContainer; its transport defaults to SSH.
func (p *MPIProgramSpec) setDefaults(mainContainer string, o OperatorDefaults) {
	p.setPolicyDefaults(MPITransportSSH, o)
	p.setWorkerDefaults(mainContainer)
}

// setWorkerDefaults fills the worker's count and slots and the launcher's limits.
func (p *MPIProgramSpec) setWorkerDefaults(mainContainer string) {
	if p.Worker.Replicas == nil {
		p.Worker.Replicas = ptr.To[int32](1)
	}
	if p.Worker.Slots == nil {
		p.Worker.Slots = ptr.To(SlotsFromTemplate(&p.Worker.Template, mainContainer))
	}
	if p.Launcher == nil {
		p.Launcher = &MPILauncher{}
	}
	setJobLimitDefaults(&p.Launcher.BackoffLimit, &p.Launcher.ActiveDeadlineSeconds, &p.RunPolicy)
}

// setPolicyDefaults fills the parts of an MPI program that do not depend on how its worker and
// launcher are written: the MPI implementation, the launch (transport default given), the run
// and scheduling policies, and the T9k scheduler's queue and priority folded into the
// scheduling policy where it names none (so the stored spec says what the gang provider and
// the pods get).
func (p *MPIProgramSpec) setPolicyDefaults(transport MPITransport, o OperatorDefaults) {
	if p.MPIImplementation == "" {
		p.MPIImplementation = DefaultMPIImplementation
	}
	setLaunchDefaults(&p.MPILaunch, transport)
	setPolicyDefaults(&p.RunPolicy, &p.SchedulingPolicy, o)
	p.SchedulingPolicy = p.Scheduler.FoldInto(p.SchedulingPolicy)
}

// setJobLimitDefaults fills a master's (launcher's) retries and deadline from the run policy:
// its own limits win, the run policy's come next, then the batch Job's default retries.
func setJobLimitDefaults(backoffLimit **int32, deadline **int64, rp *RunPolicy) {
	if *backoffLimit == nil {
		*backoffLimit = ptr.To(ptr.Deref(rp.BackoffLimit, DefaultBackoffLimit))
	}
	if *deadline == nil && rp.ActiveDeadlineSeconds != nil {
		*deadline = ptr.To(*rp.ActiveDeadlineSeconds)
	}
}

// setLaunchDefaults fills the transport (def when none is named) and its settings.
func setLaunchDefaults(l *MPILaunch, def MPITransport) {
	if l.Transport == "" {
		l.Transport = def // "" (kubeflow's form) leaves it unset
	}
	if l.Transport == MPITransportSSH {
		if l.SSH == nil {
			l.SSH = &SSHConfig{}
		}
		if l.SSH.SSHDPath == "" {
			l.SSH.SSHDPath = DefaultSSHDPath
		}
		if l.SSH.Port == nil {
			l.SSH.Port = ptr.To(DefaultSSHPort)
		}
	}
	if l.WaitForWorkersTimeoutSeconds == nil {
		l.WaitForWorkersTimeoutSeconds = ptr.To(DefaultWaitForWorkersTimeoutSeconds)
	}
}

// setPolicyDefaults fills the clean-up policy (from the T9k spelling cleanUpWorkers when given:
// true is Running, false None), when it applies, the NetworkPolicy switch (written down so that
// kubectl get -o yaml shows how to turn it off) and the operator's gang provider.
func setPolicyDefaults(rp *RunPolicy, sp *SchedulingPolicy, o OperatorDefaults) {
	if rp.CleanPodPolicy == nil {
		p := CleanPodPolicyRunning
		if rp.CleanUpWorkers != nil && !*rp.CleanUpWorkers {
			p = CleanPodPolicyNone
		}
		rp.CleanPodPolicy = &p
	}
	if rp.CleanPodPolicyOn == nil {
		rp.CleanPodPolicyOn = ptr.To(CleanPodPolicyOnFinished)
	}
	if rp.NetworkPolicy == nil {
		rp.NetworkPolicy = &NetworkPolicyConfig{}
	}
	if rp.NetworkPolicy.Enabled == nil {
		rp.NetworkPolicy.Enabled = ptr.To(true)
	}
	if sp.Gang == nil && o.Gang != "" {
		sp.Gang = ptr.To(o.Gang)
	}
}
