package engine

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// podChanged lets a pod's update queue a pass of its job only when something the engine reads
// of the pod changed. The engine reads pods from the cache, where TrimPod has cut each one down
// to what it uses (phase, reason, conditions, container and init-container states and restart
// counts, labels, owners, node, deletion), so an update whose trimmed pods are alike, but for
// the resourceVersion, cannot change what a pass computes: a kubelet's heartbeat-like status
// rewrites, an annotation set by someone, a container's started time. Creates and deletes
// always pass. Whatever TrimPod keeps is compared, so a field added to it (a condition a
// restart decision reads, say DisruptionTarget) is followed without touching this predicate.
var podChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !sameForEngine(e.ObjectOld, e.ObjectNew)
	},
}

// sameForEngine reports whether two versions of a pod agree on everything TrimPod keeps.
func sameForEngine(older, newer any) bool {
	a, okA := trimmedPod(older)
	b, okB := trimmedPod(newer)
	if !okA || !okB {
		return false
	}
	a.ResourceVersion, b.ResourceVersion = "", ""
	return equality.Semantic.DeepEqual(a, b)
}

// trimmedPod is obj as the cache holds it (TrimPod is idempotent, so an already trimmed pod
// comes back alike), in a new Pod whose own fields may be set.
func trimmedPod(obj any) (*corev1.Pod, bool) {
	if _, ok := obj.(*corev1.Pod); !ok {
		return nil, false
	}
	t, err := TrimPod(obj)
	if err != nil {
		return nil, false
	}
	p, ok := t.(*corev1.Pod)
	return p, ok
}
