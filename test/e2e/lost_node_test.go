package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// lostNodeWait bounds the waits of a node going unreachable: kube-controller-manager marks a
// node whose kubelet stopped renewing its lease Unknown after its 40 s grace period
// (hack/controlplane/kwokctl.yaml), and the operator counts it lost 15 s later (operatorArgs).
const lostNodeWait = 3 * time.Minute

// lostNodeJob runs the T9k example as a 1+4 MPIJob of 1.5-CPU pods on a pool of six 2-CPU nodes
// of its own, one pod per node, with a failure policy of no restart (a lost node is a
// disruption: it does not count). It returns the node of worker 1 once the job runs.
func lostNodeJob(t *testing.T, ns, pool string) string {
	t.Helper()
	ctx := context.Background()
	nodePool(t, pool, 6, "2")
	job := loadMPIJob(t, ns)
	job.Spec.Worker.Replicas = ptr.To[int32](4)
	onPool(&job.Spec.Worker.Template, pool, "1500m")
	job.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: "3600s"}
	job.Spec.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 0}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	worker := &corev1.Pod{}
	waitForExampleMPIJob(t, ns, "Running with 4 ready workers", func(j *troupev1.MPIJob) bool {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example-worker-1"}, worker)
		return err == nil && j.Status.Phase == troupev1.JobRunning && j.Status.Workers == "4/4"
	})
	return worker.Spec.NodeName
}

// unmanage makes a simulated node unreachable: labelled troupe.dev/simulate-unreachable, kwok
// lets it go (hack/controlplane/kwokctl.yaml) and no longer renews its lease, posts its status or
// runs its pods, as a kubelet on a node that lost power or network. It returns when the node
// controller has marked it not Ready, and when.
func unmanage(t *testing.T, node string) time.Time {
	t.Helper()
	if out, err := kubectl("label", "node", node, "troupe.dev/simulate-unreachable=true"); err != nil {
		t.Fatalf("kubectl label node %s: %v\n%s", node, err, out)
	}
	var since time.Time
	testutil.Eventually(t, "node "+node+" not Ready", pollInterval, lostNodeWait, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				since = c.LastTransitionTime.Time
				return true, nil
			}
		}
		return false, nil
	})
	return since
}

// podsOfJobOn are the MPIJob's pods in ns, and those of them on node.
func podsOfJobOn(t *testing.T, ns, node string) (all, onNode []corev1.Pod) {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == node {
			onNode = append(onNode, p)
		}
	}
	return pods.Items, onNode
}

// runningAgain waits until the job runs its next attempt with every worker ready, and checks
// that its restart counted as NodeLost, that none of its pods is on the lost node or
// terminating, and that no pod of the new attempt met one of the old (hist).
func runningAgain(t *testing.T, ns, node string, hist *podHistory) {
	t.Helper()
	got := &troupev1.MPIJob{}
	testutil.Eventually(t, "MPIJob running again", pollInterval, lostNodeWait, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example"}, got)
		return err == nil && got.Status.Restarts == 1 && got.Status.Phase == troupev1.JobRunning && got.Status.Workers == "4/4", err
	})
	if !slices.Equal(got.Status.RestartsByReason, []troupev1.RestartCount{{Reason: troupev1.FailureNodeLost, Count: 1}}) || got.Status.UncountedRestarts != 1 {
		t.Errorf("restarts by reason %v (uncounted %d), want one NodeLost not counted", got.Status.RestartsByReason, got.Status.UncountedRestarts)
	}
	all, onNode := podsOfJobOn(t, ns, node)
	if len(onNode) > 0 {
		t.Errorf("pod %s still on the lost node %s", onNode[0].Name, node)
	}
	if len(all) != 5 {
		t.Errorf("%d pods, want 5 (launcher and 4 workers)", len(all))
	}
	for _, p := range all {
		if p.DeletionTimestamp != nil || p.Labels[troupev1.LabelRestartAttempt] != "1" {
			t.Errorf("pod %s: terminating %v, attempt %q", p.Name, p.DeletionTimestamp != nil, p.Labels[troupev1.LabelRestartAttempt])
		}
	}
	if o := hist.overlapOfFirstRestart(); o != "" {
		t.Errorf("duplicated: %s", o)
	}
}

// A node that stops answering under a running 1+4 MPIJob (issue 51): once it has been not Ready
// for the operator's --lost-node-timeout, the job restarts, counted as NodeLost and naming the
// node. By default the pod on the node stays (the node may still run it) and the job says how
// to let it go; the admin's out-of-service taint does, and the job runs again on the other
// nodes. With --lost-node-force-delete (TestLostNodeRecoversWithForceDelete), the job runs
// again with nobody's help.
func TestLostNodeRecovers(t *testing.T) {
	t.Parallel() // the node it makes unreachable and taints is of its own pool
	t.Run("out-of-service", func(t *testing.T) {
		ns := newNamespace(t)
		hist := watchPods(t, ns)
		node := lostNodeJob(t, ns, "lost-"+ns)
		since := unmanage(t, node)

		got := &troupev1.MPIJob{}
		testutil.Eventually(t, "the restart recorded", pollInterval, lostNodeWait, func(ctx context.Context) (bool, error) {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example"}, got)
			return err == nil && got.Status.Restarts == 1, err
		})
		recorded := time.Since(since)
		c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionRestarting)
		want := fmt.Sprintf("worker pod mpi-example-worker-1: node %s is lost (not Ready since ", node)
		if c == nil || !strings.Contains(c.Message, want) || !strings.Contains(c.Message, "kubectl taint nodes "+node+" node.kubernetes.io/out-of-service=nodeshutdown:NoExecute") {
			t.Fatalf("Restarting %+v, want it to say %q and the way out", c, want)
		}
		// The restart stops the old attempt; the pod on the node that does not answer stays.
		testutil.Eventually(t, "the other pods of the attempt gone", pollInterval, waitTimeout, func(context.Context) (bool, error) {
			all, onNode := podsOfJobOn(t, ns, node)
			return len(onNode) > 0 && len(all) == len(onNode), nil
		})
		if st := getMPIJobStatus(t, ns); restartReasonOf(st) != troupev1.ReasonStoppingAttempt {
			t.Fatalf("Restarting %s while the pod stays, want StoppingAttempt", restartReasonOf(st))
		}

		taint := time.Now()
		if out, err := kubectl("taint", "nodes", node, "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"); err != nil {
			t.Fatalf("kubectl taint: %v\n%s", err, out)
		}
		runningAgain(t, ns, node, hist)
		t.Logf("node %s not Ready at %s: restart recorded %.1fs after; running again %.1fs after the out-of-service taint",
			node, since.Format(time.RFC3339), recorded.Seconds(), time.Since(taint).Seconds())
	})
}

// TestLostNodeRecovers with the operator's --lost-node-force-delete: the job runs again on the
// other nodes with nobody's help, within the timeout and a minute.
func TestLostNodeRecoversWithForceDelete(t *testing.T) {
	// Not parallel: restarts the operator (with --lost-node-force-delete, then without), and
	// bounds how soon the job runs again, which a loaded machine would stretch.
	restartOperator(t, "--lost-node-force-delete")
	t.Cleanup(func() { restartOperator(t) })
	ns := newNamespace(t)
	hist := watchPods(t, ns)
	node := lostNodeJob(t, ns, "lost-"+ns)
	since := unmanage(t, node)
	runningAgain(t, ns, node, hist)
	took := time.Since(since)
	expectEvent(t, ns, "mpi-example", troupev1.EventNodeLost, fmt.Sprintf("(grace period 0): node %s is lost (not Ready since ", node))
	// The bound: the timeout (15 s here) plus 60 s.
	if took > 75*time.Second {
		t.Errorf("running again %.1fs after the node was not Ready, want at most the timeout (15s) + 60s", took.Seconds())
	}
	t.Logf("node %s not Ready at %s: running again on the other nodes %.1fs after, with nobody's help", node, since.Format(time.RFC3339), took.Seconds())
}

func getMPIJobStatus(t *testing.T, ns string) *troupev1.JobStatus {
	t.Helper()
	var j troupev1.MPIJob
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mpi-example"}, &j); err != nil {
		t.Fatal(err)
	}
	return &j.Status
}

func restartReasonOf(st *troupev1.JobStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionRestarting); c != nil {
		return c.Reason
	}
	return ""
}
