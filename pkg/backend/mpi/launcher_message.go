package mpi

import corev1 "k8s.io/api/core/v1"

// decorateLauncherMessage makes each launcher container whose template leaves the termination
// message policy unset end with its log's last lines as the termination message
// (FallbackToLogsOnError: only when it fails and wrote no message of its own). mpirun and
// mpiexec write why a job failed to their output, not to /dev/termination-log; this way it
// reaches the pod's status and the job's Failed condition.
func decorateLauncherMessage(tmpl *corev1.PodTemplateSpec) {
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		if c.TerminationMessagePolicy == "" {
			c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		}
	}
}
