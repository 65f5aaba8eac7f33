package kueue

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Admitted, Evicted and QuotaReserved read a Workload's conditions.
func Admitted(wl *kueuev1.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadAdmitted)
}

// Evicted returns the Workload's Evicted condition while it is True.
func Evicted(wl *kueuev1.Workload) *metav1.Condition {
	c := meta.FindStatusCondition(wl.Status.Conditions, kueuev1.WorkloadEvicted)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}

// HasQuota reports whether the Workload holds quota in a ClusterQueue.
func HasQuota(wl *kueuev1.Workload) bool {
	return wl.Status.Admission != nil || meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadQuotaReserved)
}

// Finished reports whether the Workload was marked finished.
func Finished(wl *kueuev1.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1.WorkloadFinished)
}

// AdmittedCondition is the job's Admitted condition: what Kueue says of its Workload (nil: not
// made yet), naming the LocalQueue it waits in and, once admitted, the ClusterQueue.
func AdmittedCondition(wl *kueuev1.Workload, queue string) metav1.Condition {
	c := metav1.Condition{Type: troupev1.ConditionAdmitted, Status: metav1.ConditionFalse, Reason: troupev1.ReasonQueued}
	switch {
	case wl == nil:
		c.Message = fmt.Sprintf("queued in LocalQueue %s: creating its Workload", queue)
	case Evicted(wl) != nil:
		ev := Evicted(wl)
		c.Reason = ev.Reason
		c.Message = fmt.Sprintf("evicted by Kueue (%s): %s; queued in LocalQueue %s again", ev.Reason, ev.Message, queue)
	case Admitted(wl) && wl.Status.Admission != nil:
		c.Status, c.Reason = metav1.ConditionTrue, troupev1.ReasonAdmitted
		c.Message = fmt.Sprintf("admitted by ClusterQueue %s (LocalQueue %s, Workload %s)", wl.Status.Admission.ClusterQueue, queue, wl.Name)
	case wl.Status.Admission != nil && len(pendingChecks(wl)) > 0:
		c.Message = fmt.Sprintf("waiting in LocalQueue %s for admission checks (quota reserved in ClusterQueue %s, Workload %s): %s",
			queue, wl.Status.Admission.ClusterQueue, wl.Name, strings.Join(pendingChecks(wl), "; "))
	default:
		c.Message = fmt.Sprintf("waiting in LocalQueue %s for quota (Workload %s)", queue, wl.Name)
		if q := meta.FindStatusCondition(wl.Status.Conditions, kueuev1.WorkloadQuotaReserved); q != nil && q.Status == metav1.ConditionFalse && q.Message != "" {
			c.Message += ": " + q.Message
		}
	}
	return c
}

// pendingChecks describes each admission check of the Workload that is not Ready yet, with its
// state and its controller's message ("prov (Pending): waiting for capacity").
func pendingChecks(wl *kueuev1.Workload) []string {
	var out []string
	for _, ac := range wl.Status.AdmissionChecks {
		if ac.State == kueuev1.CheckStateReady {
			continue
		}
		s := fmt.Sprintf("%s (%s)", ac.Name, ac.State)
		if ac.Message != "" {
			s += ": " + ac.Message
		}
		out = append(out, s)
	}
	return out
}

// Reasons and messages of the Workload's PodsReady condition, as Kueue's own job integrations
// write them, so that waitForPodsReady (which evicts a Workload whose pods do not all become
// ready in time) and its metrics read a troupe job as any other.
const (
	podsNotReadyMessage   = "Not all pods are ready or succeeded"
	podsRecoveringMessage = "At least one pod has failed, waiting for recovery"
	podsReadyMessage      = "All pods reached readiness and the workload is running"
)

// PodsReady reports whether every pod the job should have now is ready or has succeeded.
func PodsReady(st *troupev1.JobStatus) bool {
	if len(st.ReplicaStatuses) == 0 {
		return false
	}
	for _, rs := range st.ReplicaStatuses {
		if rs.Ready+rs.Succeeded < rs.Replicas {
			return false
		}
	}
	return true
}

// PodsReadyCondition is the Workload's PodsReady condition for a job whose pods are (or are not)
// all ready: True once they are (Started, or Recovered after a loss); False while the job waits
// to start, or after it lost a pod it had (WaitForRecovery), until they are again.
func PodsReadyCondition(wl *kueuev1.Workload, ready bool) metav1.Condition {
	c := metav1.Condition{Type: kueuev1.WorkloadPodsReady, Status: metav1.ConditionFalse,
		Reason: kueuev1.WorkloadWaitForStart, Message: podsNotReadyMessage, ObservedGeneration: wl.Generation}
	if !Admitted(wl) {
		return c
	}
	old := meta.FindStatusCondition(wl.Status.Conditions, kueuev1.WorkloadPodsReady)
	recovering := old != nil && (old.Status == metav1.ConditionTrue ||
		old.Reason == kueuev1.WorkloadWaitForRecovery || old.Reason == kueuev1.WorkloadRecovered)
	switch {
	case ready && recovering && old.Status == metav1.ConditionTrue:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, old.Reason, podsReadyMessage
	case ready && recovering && old.Reason == kueuev1.WorkloadWaitForRecovery:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, kueuev1.WorkloadRecovered, podsReadyMessage
	case ready:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, kueuev1.WorkloadStarted, podsReadyMessage
	case recovering:
		c.Reason, c.Message = kueuev1.WorkloadWaitForRecovery, podsRecoveringMessage
	}
	return c
}
