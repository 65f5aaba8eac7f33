package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// What the test's stand-in provisioner asks of the pods it provisions nodes for, as Kueue's
// ProvisioningRequest check does (its annotations name the ProvisioningRequest the pods consume),
// plus a label, a node label and a taint that only the nodes it "provisioned" carry.
const (
	provisionedLabel = "troupe.dev/e2e-provisioned"
	consumeAnnot     = "autoscaling.x-k8s.io/consume-provisioning-request"
	classAnnot       = "autoscaling.x-k8s.io/provisioning-class-name"
)

// TestKueueAdmissionCheckPodSetUpdates queues a ChainerJob behind an AdmissionCheck of the
// test's own (controllerName troupe.dev/e2e-provisioner). The test plays its controller as
// Kueue's ProvisioningRequest controller would with a cluster-autoscaler behind it: it keeps
// the check Pending with a message while "capacity is provisioned", then "provisions" the
// pool's nodes (a label and a taint only they have) and sets the check Ready with podSetUpdates
// for both pod sets; then Retry, which evicts the job. cluster-autoscaler itself does not build
// here (docs/kueue.md). The job:
//   - waits suspended, no pod, its Admitted condition naming the check and its message;
//   - once admitted, runs its pods with the updates' annotations, label, nodeSelector and
//     toleration (they could not be scheduled on the provisioned nodes without the last two);
//   - evicted by the check's Retry, is stopped and its templates are put back as written.
func TestKueueAdmissionCheckPodSetUpdates(t *testing.T) {
	t.Parallel() // it labels and taints the nodes of its own pool only
	ctx := context.Background()
	ns := newNamespace(t)
	pool := "prov-" + ns
	gangPool(t, pool)
	kc := kueueClient(t)
	check := checkedQueue(t, kc, ns, pool)

	job := queuedChainerJob("prov", ns, "", "600s")
	delete(job.Labels, troupev1.LabelWorkloadPriorityClass)
	createJob(t, job)

	const waiting = "Waiting for resources. ProvisioningRequest prov-pr-1 is not Provisioned yet (stand-in provisioner)"
	setCheck(t, kc, job, kueuev1.AdmissionCheckState{Name: kueuev1.AdmissionCheckReference(check), State: kueuev1.CheckStatePending, Message: waiting})
	eventually(t, "prov says it waits for the admission check", func(ctx context.Context) (bool, error) {
		msg, err := kubectl("get", "chainerjob", "-n", ns, "prov", "-o", `jsonpath={.status.conditions[?(@.type=="Admitted")].message}`)
		if err != nil {
			return false, fmt.Errorf("%w: %s", err, msg)
		}
		return strings.Contains(msg, "waiting in LocalQueue lq for admission checks") && strings.Contains(msg, check+" (Pending): "+waiting), nil
	})
	msg, _ := kubectl("get", "chainerjob", "-n", ns, "prov", "-o", `jsonpath={.status.conditions[?(@.type=="Admitted")].message}`)
	t.Logf("kubectl: Admitted: %s", msg)
	expectSuspendedWithoutPods(t, job)

	// "Provisioned": the pool's nodes get the label and taint the updates point the pods to.
	nodes := &corev1.NodeList{}
	if err := k8s.List(ctx, nodes, client.MatchingLabels{gangPoolLabel: pool}); err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		orig := n.DeepCopy()
		n.Labels[provisionedLabel] = ns
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: provisionedLabel, Value: ns, Effect: corev1.TaintEffectNoSchedule})
		if err := k8s.Patch(ctx, n, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}
	update := func(podSet string) kueuev1.PodSetUpdate {
		return kueuev1.PodSetUpdate{
			Name:         kueuev1.PodSetReference(podSet),
			Labels:       map[string]string{provisionedLabel: ns},
			Annotations:  map[string]string{consumeAnnot: "prov-pr-1", classAnnot: "check-capacity.autoscaling.x-k8s.io"},
			NodeSelector: map[string]string{provisionedLabel: ns},
			Tolerations:  []corev1.Toleration{{Key: provisionedLabel, Operator: corev1.TolerationOpEqual, Value: ns, Effect: corev1.TaintEffectNoSchedule}},
		}
	}
	setCheck(t, kc, job, kueuev1.AdmissionCheckState{Name: kueuev1.AdmissionCheckReference(check), State: kueuev1.CheckStateReady,
		Message: "Provisioned", PodSetUpdates: []kueuev1.PodSetUpdate{update("master"), update("ws0")}})
	waitPhase(t, job, troupev1.JobRunning)
	eventually(t, "prov's master and 2 workers bound, carrying the check's podSetUpdates", func(ctx context.Context) (bool, error) {
		pods, err := queuedJobPods(ctx, job)
		if err != nil {
			return false, err
		}
		bound := 0
		for _, p := range pods {
			if p.Annotations[consumeAnnot] != "prov-pr-1" || p.Labels[provisionedLabel] != ns || p.Spec.NodeSelector[provisionedLabel] != ns {
				return false, fmt.Errorf("pod %s: annotations %v labels %v nodeSelector %v: want the check's podSetUpdates", p.Name, p.Annotations, p.Labels, p.Spec.NodeSelector)
			}
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 3, nil
	})

	// Retry evicts the Workload: the job stops and its templates are as written again.
	setCheck(t, kc, job, kueuev1.AdmissionCheckState{Name: kueuev1.AdmissionCheckReference(check), State: kueuev1.CheckStateRetry, Message: "the provisioned nodes were lost"})
	expectSuspendedWithoutPods(t, job)
	eventually(t, "prov's templates back as written", func(ctx context.Context) (bool, error) {
		out, err := kubectl("get", "chainerjob", "-n", ns, "prov", "-o",
			`jsonpath={.spec.master.template.metadata.annotations}{.spec.master.template.spec.nodeSelector}{.spec.workerSets.ws0.template.spec.tolerations}`)
		if err != nil {
			return false, fmt.Errorf("%w: %s", err, out)
		}
		return !strings.Contains(out, consumeAnnot) && !strings.Contains(out, provisionedLabel), nil
	})
}

// checkedQueue makes the test's queue behind an AdmissionCheck of its own, which it reports
// Active as its controller would: a ResourceFlavor of the pool, a ClusterQueue of 8 CPUs that
// runs the check, and the LocalQueue lq. It returns the check's name.
func checkedQueue(t *testing.T, kc client.Client, ns, pool string) string {
	t.Helper()
	ac := &kueuev1.AdmissionCheck{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec:       kueuev1.AdmissionCheckSpec{ControllerName: "troupe.dev/e2e-provisioner"},
	}
	flavor, cq, lq := poolQueue(ns, pool, "8", "64Gi")
	cq.Spec.AdmissionChecksStrategy = &kueuev1.AdmissionChecksStrategy{AdmissionChecks: []kueuev1.AdmissionCheckStrategyRule{{Name: kueuev1.AdmissionCheckReference(pool)}}}
	createQueueObjects(t, kc, ac, flavor, cq, lq)
	eventually(t, "AdmissionCheck "+ac.Name+" Active", func(ctx context.Context) (bool, error) {
		got := &kueuev1.AdmissionCheck{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(ac), got); err != nil {
			return false, err
		}
		if meta.IsStatusConditionTrue(got.Status.Conditions, kueuev1.AdmissionCheckActive) {
			return true, nil
		}
		meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: kueuev1.AdmissionCheckActive, Status: metav1.ConditionTrue,
			Reason: "Active", Message: "the e2e test plays this check's controller"})
		if err := kc.Status().Update(ctx, got); err != nil {
			t.Logf("activate AdmissionCheck %s: %v (again)", ac.Name, err)
		}
		return false, nil
	})
	waitClusterQueueActive(t, kc, cq)
	return pool
}

// setCheck writes the state of the job's admission check on its Workload, as the check's
// controller does, once Kueue has reserved quota for it and listed the check.
func setCheck(t *testing.T, kc client.Client, job queuedJob, state kueuev1.AdmissionCheckState) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s's check %s set %s", job.GetName(), state.Name, state.State), func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, kc, job)
		if err != nil || wl == nil || wl.Status.Admission == nil {
			return false, err
		}
		i := -1
		for j, ac := range wl.Status.AdmissionChecks {
			if ac.Name == state.Name {
				i = j
			}
		}
		if i < 0 {
			return false, nil
		}
		orig := wl.DeepCopy()
		state.LastTransitionTime = metav1.Now()
		wl.Status.AdmissionChecks[i] = state
		if err := kc.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			t.Logf("set the check: %v (again)", err)
			return false, nil
		}
		return true, nil
	})
}
