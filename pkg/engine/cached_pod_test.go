package engine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// readBack is a cached pod as the engine reads it: the cache's reader hands on a deep copy.
func readBack(cached any) *corev1.Pod {
	return cached.(runtime.Object).DeepCopyObject().(*corev1.Pod)
}

// A pod read back from the cache has every field the engine reads, as the pod had it, and
// nothing else.
func TestCachedPodReadsBackAsThePod(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	ended := metav1.NewTime(started.Add(time.Minute))
	deleted := metav1.NewTime(started.Add(time.Hour))
	meta := metav1.ObjectMeta{Name: "j-launcher-x", Namespace: "ml", UID: "pod-uid", ResourceVersion: "7", Generation: 1,
		CreationTimestamp: started, DeletionTimestamp: &deleted, DeletionGracePeriodSeconds: ptr.To[int64](0),
		Labels: map[string]string{troupev1.LabelJobUID: "u", troupev1.LabelRole: troupev1.RoleMaster, troupev1.MPIJobNameLabel: "j"},
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "batch/v1", Kind: "Job", Name: "j-launcher", UID: "job-uid", Controller: ptr.To(true)}}}
	terminated := corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "rank 1 exited", StartedAt: started, FinishedAt: ended}
	pod := &corev1.Pod{
		ObjectMeta: *meta.DeepCopy(),
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "launcher", Image: "mpi"}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: ended},
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "evicted"},
				{Type: corev1.ContainersReady, Status: corev1.ConditionFalse},
			},
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "troupe-wait", RestartCount: 1, State: corev1.ContainerState{Terminated: &terminated}},
				{Name: "sync", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "launcher", Ready: true, RestartCount: 2, ImageID: "sha",
				State:                corev1.ContainerState{Terminated: &terminated},
				LastTerminationState: corev1.ContainerState{Terminated: &terminated}}},
		},
	}
	lastExit := &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "rank 1 exited"}
	want := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: meta,
		Spec:       corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodFailed"},
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "evicted"},
			},
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "troupe-wait", RestartCount: 1, State: corev1.ContainerState{Terminated: &terminated}},
				{Name: "sync", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "launcher", Ready: true, RestartCount: 2,
				// A master's exit keeps its end, not its start.
				State:                corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "rank 1 exited", FinishedAt: ended}},
				LastTerminationState: corev1.ContainerState{Terminated: lastExit}}},
		},
	}
	cached, err := trimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := readBack(cached)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}

	// A running worker's only condition, Ready, is held as its status; it reads back the same.
	worker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w-0", Labels: map[string]string{troupev1.LabelRole: troupev1.RoleWorker}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}}}}
	cached, _ = trimPod(worker)
	if got := readBack(cached).Status.Conditions; !cmp.Equal(got, []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}) {
		t.Errorf("a running worker's conditions read back as %+v", got)
	}
}

// What the engine does with a pod it read does not reach the cache.
func TestCachedPodSharesNoMemoryWithWhatIsRead(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w-0", Labels: map[string]string{troupev1.LabelRole: troupev1.RoleWorker}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed,
			Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}}}
	cached, _ := trimPod(pod)
	before := readBack(cached)
	read := readBack(cached)
	read.Labels[troupev1.LabelRole] = "changed"
	read.Status.Conditions[0].Reason = "changed"
	read.Status.ContainerStatuses[0].State.Waiting.Reason = "changed"
	read.Status.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode = 9
	if diff := cmp.Diff(before, readBack(cached)); diff != "" {
		t.Errorf("a change of a pod read reached the cache (-before +after):\n%s", diff)
	}
}
