package engine

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// podChanged lets a pod's update queue a pass of its job only when something the engine reads
// of the pod changed. The engine reads pods from the cache, where TrimPod has cut each one down
// to what it uses, so an update that leaves every field TrimPod keeps alike cannot change what
// a pass computes: a kubelet's rewrite of probe times, an annotation set by someone, a
// container's start time. Creates and deletes always pass. sameForEngine compares the fields
// TrimPod keeps, field by field and without copying: it runs on every update of every pod of
// every job, so it must cost less than the passes it saves. A field added to TrimPod must be
// added to it (TestPodChangedPassesWhatTheEngineReads checks each kept field).
var podChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		older, okOld := e.ObjectOld.(*corev1.Pod)
		newer, okNew := e.ObjectNew.(*corev1.Pod)
		return !okOld || !okNew || !sameForEngine(older, newer)
	},
}

// sameForEngine reports whether two versions of a pod agree on everything TrimPod keeps
// (conditions without their probe and transition times, which change only with them).
func sameForEngine(a, b *corev1.Pod) bool {
	return a.Name == b.Name && a.Namespace == b.Namespace && a.UID == b.UID &&
		a.Generation == b.Generation && a.CreationTimestamp.Equal(&b.CreationTimestamp) &&
		a.DeletionTimestamp.Equal(b.DeletionTimestamp) &&
		maps.Equal(a.Labels, b.Labels) &&
		slices.EqualFunc(a.OwnerReferences, b.OwnerReferences, sameOwner) &&
		a.Spec.NodeName == b.Spec.NodeName &&
		a.Status.Phase == b.Status.Phase && a.Status.Reason == b.Status.Reason &&
		slices.EqualFunc(a.Status.Conditions, b.Status.Conditions, sameCondition) &&
		slices.EqualFunc(a.Status.InitContainerStatuses, b.Status.InitContainerStatuses, sameContainer) &&
		slices.EqualFunc(a.Status.ContainerStatuses, b.Status.ContainerStatuses, sameContainer)
}

func sameOwner(a, b metav1.OwnerReference) bool {
	return a.UID == b.UID && a.Kind == b.Kind && a.Name == b.Name && a.APIVersion == b.APIVersion &&
		ptr.Equal(a.Controller, b.Controller) && ptr.Equal(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

func sameCondition(a, b corev1.PodCondition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

// sameContainer compares what TrimPod keeps of a container's status; the running and terminated
// states are compared for every container (TrimPod keeps them for init containers, and the
// terminated state for the master's).
func sameContainer(a, b corev1.ContainerStatus) bool {
	if a.Name != b.Name || a.Ready != b.Ready || a.RestartCount != b.RestartCount {
		return false
	}
	ra, rb := a.State.Running, b.State.Running
	if (ra == nil) != (rb == nil) || (ra != nil && !ra.StartedAt.Equal(&rb.StartedAt)) {
		return false // an init container started: the launcher waits (LauncherWaiting)
	}
	ta, tb := a.State.Terminated, b.State.Terminated
	if ta == nil || tb == nil {
		return ta == tb
	}
	return ta.ExitCode == tb.ExitCode && ta.Reason == tb.Reason && ta.Message == tb.Message &&
		ta.StartedAt.Equal(&tb.StartedAt) && ta.FinishedAt.Equal(&tb.FinishedAt)
}
