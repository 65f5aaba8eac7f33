package engine

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// podChanged lets a pod's update queue a pass of its job only when something the engine reads
// of the pod changed. What the engine reads of a pod is what TrimPod keeps, so an update is
// compared as TrimPod leaves both versions: one list of fields (TrimPod's) decides both what the
// cache holds and what wakes a job, and an update that leaves every kept field alike (a
// kubelet's rewrite of probe times, an annotation set by someone, a container's image ID) costs
// no pass. The pods the cache hands on are trimmed already; trimming again costs a copy of a few
// hundred bytes, far less than the pass it saves. Creates and deletes always pass.
var podChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		older, okOld := e.ObjectOld.(*corev1.Pod)
		newer, okNew := e.ObjectNew.(*corev1.Pod)
		return !okOld || !okNew || !sameForEngine(older, newer)
	},
}

// sameForEngine reports whether two versions of a pod agree on everything TrimPod keeps but
// the resourceVersion. Both trimmed pods come from the same decoding, so reflect's equality is
// exact for them; where it is not (a time with a monotonic reading, in tests) it errs towards a
// pass.
func sameForEngine(a, b *corev1.Pod) bool {
	ta, _ := TrimPod(a)
	tb, _ := TrimPod(b)
	pa, pb := ta.(*corev1.Pod), tb.(*corev1.Pod)
	pb.ResourceVersion = pa.ResourceVersion
	return reflect.DeepEqual(pa, pb)
}
