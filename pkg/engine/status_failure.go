package engine

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// maxExitMessage bounds the launcher's message quoted in the Failed condition: the end of the
// message (mpirun's summary is last) is kept.
const maxExitMessage = 1024

// masterExitMessage is why the last master pod that failed ended: its failed container's
// termination message (the launcher's own, or, with terminationMessagePolicy
// FallbackToLogsOnError, the end of its log: mpirun's "exited with non-zero status" summary)
// with its exit code, so that the Failed condition says what the launcher said.
func masterExitMessage(pods []corev1.Pod) string {
	var last *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Labels[troupev1.LabelRole] != troupev1.RoleMaster || p.Status.Phase != corev1.PodFailed {
			continue
		}
		if last == nil || last.CreationTimestamp.Before(&p.CreationTimestamp) {
			last = p
		}
	}
	if last == nil {
		return ""
	}
	for _, cs := range last.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 {
			continue
		}
		msg := strings.TrimSpace(t.Message)
		if len(msg) > maxExitMessage {
			msg = "..." + msg[len(msg)-maxExitMessage:]
		}
		if msg == "" {
			return fmt.Sprintf("container %s of pod %s exited %d", cs.Name, last.Name, t.ExitCode)
		}
		return fmt.Sprintf("container %s of pod %s exited %d: %s", cs.Name, last.Name, t.ExitCode, msg)
	}
	return ""
}
