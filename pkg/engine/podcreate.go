package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A pod the API server refuses (a ResourceQuota, Pod Security admission, a LimitRange) is
// reported by the Job or StatefulSet controller only as a FailedCreate event on the child; no
// condition of the child says it. The engine reads those events while a child has fewer pods
// than it wants, and puts the API server's message on the job (ReplicaFailure, reason
// FailedCreate, as a ReplicaSet reports it), so `kubectl get`/`describe` of the job says why
// it does not start.

// +kubebuilder:rbac:groups="",resources=events,verbs=list

// reasonFailedCreate is the event reason of the Job and StatefulSet controllers for a pod the
// API server refused.
const reasonFailedCreate = "FailedCreate"

// childrenLackingPods are the job's StatefulSets and master Job that have fewer pods than they
// ask for: a worker StatefulSet whose status counts fewer pods than its replicas, a master Job
// that is neither suspended nor finished and has no pod.
func childrenLackingPods(obs *Observed) []client.Object {
	var out []client.Object
	for _, name := range slices.Sorted(maps.Keys(obs.StatefulSets)) {
		sts := obs.StatefulSets[name]
		if sts.Status.Replicas < ptr.Deref(sts.Spec.Replicas, 1) {
			out = append(out, sts)
		}
	}
	if j := obs.MasterJob; j != nil && !ptr.Deref(j.Spec.Suspend, false) && terminalJobCondition(j) == nil && !hasMasterPod(obs.Pods) {
		out = append(out, j)
	}
	return out
}

func hasMasterPod(pods []corev1.Pod) bool {
	for i := range pods {
		if pods[i].Labels[troupev1.LabelRole] == troupev1.RoleMaster && pods[i].DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}

// podCreateFailures returns, for each child that lacks pods, the newest FailedCreate message
// its controller recorded, as "<Kind> <name>: <message>", looked up as podCreatePace allows (no
// watch tells when a controller records one: events are not watched, as a tenant could grow the
// operator's memory with them); recheck is when to look again, 0 when no child lacks pods.
func (r *Reconciler) podCreateFailures(ctx context.Context, s *Spec, obs *Observed) (failures []string, recheck time.Duration, err error) {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	children := childrenLackingPods(obs)
	if len(children) == 0 {
		r.podCreates.forget(key)
		return nil, 0, nil
	}
	now := r.clock.Now()
	look, found, wait := r.podCreates.due(key, s.Owner.UID, now)
	if !look {
		return found, wait, nil
	}
	for _, child := range children {
		var events corev1.EventList
		if err := r.apiReader.List(ctx, &events, client.InNamespace(s.Namespace), client.MatchingFields{
			"involvedObject.uid": string(child.GetUID()),
			"reason":             reasonFailedCreate,
		}); err != nil {
			return nil, 0, fmt.Errorf("list FailedCreate events of %s: %w", child.GetName(), err)
		}
		if e := newestEvent(events.Items); e != nil {
			failures = append(failures, fmt.Sprintf("%s %s: %s", keyOf(child).Kind, child.GetName(), strings.TrimSpace(e.Message)))
		}
	}
	return failures, r.podCreates.looked(key, now, failures), nil
}

// newestEvent is the event seen last (events are deduplicated: lastTimestamp moves, or the
// series' time for events.k8s.io writers).
func newestEvent(events []corev1.Event) *corev1.Event {
	var newest *corev1.Event
	var newestAt time.Time
	for i := range events {
		e := &events[i]
		at := e.LastTimestamp.Time
		if e.Series != nil && e.Series.LastObservedTime.After(at) {
			at = e.Series.LastObservedTime.Time
		}
		if e.EventTime.After(at) {
			at = e.EventTime.Time
		}
		if newest == nil || at.After(newestAt) {
			newest, newestAt = e, at
		}
	}
	return newest
}

// withPodCreateFailures is the ReplicaFailure condition: refused pods come first, since a job
// whose pods cannot be created will not start at all; otherwise the failed pods' condition.
func withPodCreateFailures(obs *Observed, failedPods metav1.Condition) metav1.Condition {
	if len(obs.PodCreateFailures) == 0 {
		return failedPods
	}
	return newCondition(troupev1.ConditionReplicaFailure, true, troupev1.ReasonFailedCreate,
		"the API server refused pods: "+strings.Join(obs.PodCreateFailures, "; "))
}
