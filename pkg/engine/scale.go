package engine

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// ScaleHintReplicas is the placeholder of a WorkerSet's ScaleHint replaced by the replica
// count the user asked for.
const ScaleHintReplicas = "{replicas}"

// scaledOutside tells whether a worker StatefulSet's replicas were changed by someone else
// (`kubectl scale statefulset`): the spec hash it carries is the one of what the engine wants
// now, so the engine's last write already had the wanted count, yet the count differs. When
// the engine itself changes the count (the job was scaled, suspended or ended) the hash
// differs too, so its own changes are never mistaken for another's.
func scaledOutside(cur, want *appsv1.StatefulSet) bool {
	return cur.Annotations[troupev1.AnnotationSpecHash] == want.Annotations[troupev1.AnnotationSpecHash] &&
		ptr.Deref(cur.Spec.Replicas, 1) != ptr.Deref(want.Spec.Replicas, 1)
}

// warnScaledOutside records a Warning on the job when a worker StatefulSet was scaled
// directly. The job's spec is the one source of the worker count (the hostfile, the exec Role
// and the gang follow it), so the engine puts the count back and says how to scale the job.
func (r *Reconciler) warnScaledOutside(job Object, s *Spec, cur, want *appsv1.StatefulSet) {
	if !scaledOutside(cur, want) {
		return
	}
	asked := ptr.Deref(cur.Spec.Replicas, 1)
	msg := fmt.Sprintf("StatefulSet %s was scaled to %d outside the job; troupe restored the job's %d replicas",
		cur.Name, asked, ptr.Deref(want.Spec.Replicas, 1))
	for i := range s.WorkerSets {
		if ws := &s.WorkerSets[i]; ws.StatefulSetName == cur.Name && ws.ScaleHint != "" {
			msg += ". To change the worker count, scale the job: " +
				strings.ReplaceAll(ws.ScaleHint, ScaleHintReplicas, strconv.Itoa(int(asked)))
		}
	}
	r.recorder.Eventf(job, nil, corev1.EventTypeWarning, troupev1.EventScaledOutsideJob, "Scale", "%s", msg)
}
