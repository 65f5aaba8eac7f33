package engine

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func failedMaster(name string, created time.Time, code int32, msg string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{troupev1.LabelRole: troupev1.RoleMaster}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
			{Name: "launcher", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}},
		}},
	}
}

// The Failed condition quotes the last failed launcher pod's failed container, its exit code
// and the end of its message.
func TestMasterExitMessage(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 2000) + " mpirun detected that one or more processes exited with non-zero status"
	pods := []corev1.Pod{
		failedMaster("m-2", t0.Add(time.Minute), 1, long),
		failedMaster("m-1", t0, 3, "first attempt"),
		{ObjectMeta: metav1.ObjectMeta{Name: "w-0", Labels: map[string]string{troupev1.LabelRole: "worker"}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed}},
	}
	got := masterExitMessage(masterPods(pods...))
	if !strings.HasPrefix(got, "container launcher of pod m-2 exited 1: ...") ||
		!strings.HasSuffix(got, "exited with non-zero status") || len(got) > maxExitMessage+100 {
		t.Errorf("masterExitMessage = %q", got)
	}
	if got := masterExitMessage(masterPods(failedMaster("m", t0, 2, ""))); got != "container launcher of pod m exited 2" {
		t.Errorf("without a message: %q", got)
	}
	if got := masterExitMessage(masterPods(pods[2:]...)); got != "" {
		t.Errorf("no failed master: %q", got)
	}
}

// The operator's cache trims pods (trimPod); a master's exit must survive the trim, or the
// Failed condition has nothing to quote (seen on the real node).
func TestMasterExitMessageAfterTrim(t *testing.T) {
	pod := failedMaster("m", time.Now(), 3, "mpiexec noticed that process rank 1 exited")
	trimmed, err := trimPod(&pod)
	if err != nil {
		t.Fatal(err)
	}
	got := masterExitMessage(masterPods(*readBack(trimmed)))
	if want := "container launcher of pod m exited 3: mpiexec noticed that process rank 1 exited"; got != want {
		t.Errorf("after trimPod: %q, want %q", got, want)
	}
}
