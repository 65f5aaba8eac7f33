package mpi

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

const (
	// WaitContainerName is the launcher's init container that waits for the workers.
	WaitContainerName = troupev1.ContainerLauncherWait
	// WaitTimeoutExitCode is troupe-agent wait's exit code when hosts are still missing at the
	// deadline. The launcher Job fails at once on it instead of retrying: waiting again would
	// only delay the same answer.
	WaitTimeoutExitCode = troupev1.ExitCodeLauncherWaitTimeout
	// DefaultWaitTimeoutSeconds bounds the launcher's wait when the spec does not (the job's
	// default, in apis).
	DefaultWaitTimeoutSeconds = troupev1.DefaultWaitForWorkersTimeoutSeconds

	agentBinVolume = "troupe-bin"
)

// transportName is the --transport value troupe-agent wait checks hosts with.
func transportName(t Transport) string {
	switch t.(type) {
	case SSH:
		return string(troupev1.MPITransportSSH)
	case KubeExec:
		return string(troupev1.MPITransportKubeExec)
	default:
		return "DNS"
	}
}

// decorateLauncher adds the wait init container to the launcher pod: it installs troupe-agent
// for the launcher's containers, then waits, bounded, until every other host of the hostfile
// resolves and accepts the transport. The launcher's own command starts only after that, so it
// never crash-loops on workers that are still starting, and a wait that times out fails the
// job with the hosts' names in the pod's termination message.
func (b Backend) decorateLauncher(s *engine.Spec, tmpl *corev1.PodTemplateSpec) {
	timeout := b.WaitTimeoutSeconds
	if timeout == 0 {
		timeout = DefaultWaitTimeoutSeconds
	}
	args := []string{
		"wait",
		"--hostfile=" + HostfilePath,
		"--timeout=" + strconv.Itoa(int(timeout)) + "s",
		"--transport=" + transportName(b.Transport),
		"--install-to=" + AgentBinDir,
	}
	if ssh, ok := b.Transport.(SSH); ok {
		args = append(args, "--port="+strconv.Itoa(int(ssh.SSHPort())))
	}
	if b.WaitBestEffort {
		args = append(args, "--best-effort")
	}
	if b.WaitMinHosts > 0 {
		args = append(args, "--min-hosts="+strconv.Itoa(int(b.WaitMinHosts)))
	}
	env := []corev1.EnvVar{{Name: EnvExecContainer, Value: s.MainContainer}}
	tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{
		Name: agentBinVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
	})
	binMount := corev1.VolumeMount{Name: agentBinVolume, MountPath: AgentBinDir}
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: agentBinVolume, MountPath: AgentBinDir, ReadOnly: true})
	}
	wait := corev1.Container{
		Name:    WaitContainerName,
		Image:   b.AgentImage,
		Command: []string{"/troupe-agent"},
		Args:    args,
		Env:     env,
		VolumeMounts: []corev1.VolumeMount{
			binMount,
			{Name: configVolumeName, MountPath: ConfigMountPath, ReadOnly: true},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Resources:                engine.InjectedResources("10m", "32Mi", "500m", "128Mi"),
		SecurityContext: engine.RestrictedSecurityContext(&corev1.SecurityContext{
			RunAsNonRoot:           ptr.To(true),
			RunAsUser:              ptr.To[int64](65532),
			ReadOnlyRootFilesystem: ptr.To(true),
		}),
	}
	if hasExecToken(tmpl) {
		// It reads the workers' pods with the exec account (transport_kubeexec.go).
		wait.VolumeMounts = append(wait.VolumeMounts, execTokenMount())
	}
	tmpl.Spec.InitContainers = append([]corev1.Container{wait}, tmpl.Spec.InitContainers...)
}

// WaitFailurePolicy fails the launcher Job at once when the wait times out, instead of
// retrying it backoffLimit times. It applies only to launchers whose pods never restart in
// place (the batch Job API allows a pod failure policy with restartPolicy Never only).
func WaitFailurePolicy(tmpl *corev1.PodTemplateSpec) *batchv1.PodFailurePolicy {
	if p := tmpl.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyNever {
		return nil
	}
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To(WaitContainerName),
			Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
			Values:        []int32{WaitTimeoutExitCode},
		},
	}}}
}

// LauncherWaitContainer names the launcher's wait init container to the engine
// (engine.LauncherWaiter), which reports the wait by it.
func (Backend) LauncherWaitContainer() string { return WaitContainerName }
