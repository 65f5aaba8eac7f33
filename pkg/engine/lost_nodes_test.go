package engine

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// node is a Node whose Ready condition has status ready since the time given.
func node(name string, ready corev1.ConditionStatus, since time.Time) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready,
			Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.", LastTransitionTime: metav1.NewTime(since)}}},
	}
}

// placePods puts the job's pods on nodes: the pod named by each key on its node, every other
// pod on "node-a".
func (h *restartHarness) placePods(on map[string]string) {
	h.t.Helper()
	var pods corev1.PodList
	if err := h.c.List(h.ctx, &pods, client.InNamespace("ml")); err != nil {
		h.t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		p.Spec.NodeName = "node-a"
		if n, ok := on[p.Name]; ok {
			p.Spec.NodeName = n
		}
		if err := h.c.Update(h.ctx, p); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *restartHarness) pod(name string) *corev1.Pod {
	h.t.Helper()
	var p corev1.Pod
	err := h.c.Get(h.ctx, client.ObjectKey{Namespace: "ml", Name: name}, &p)
	if client.IgnoreNotFound(err) != nil {
		h.t.Fatal(err)
	}
	if err != nil {
		return nil
	}
	return &p
}

func (h *restartHarness) create(objs ...client.Object) {
	h.t.Helper()
	for _, o := range objs {
		if err := h.c.Create(h.ctx, o); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *restartHarness) at(t time.Time) { h.r.clock = clocktesting.NewFakePassiveClock(t) }

func (h *restartHarness) wakeAfter() time.Duration {
	h.t.Helper()
	res, err := h.r.Reconcile(h.ctx, reconcile.Request{NamespacedName: h.key})
	if err != nil {
		h.t.Fatal(err)
	}
	return res.RequeueAfter
}

// A worker on a node that stopped answering restarts the job once the node has been not Ready
// for the timeout: counted as NodeLost (a disruption: not against maxRestarts), the node named.
// Its pod stays while the node may still run it, and goes at once when the node is marked out
// of service; then the restart goes on.
func TestLostNodeRestartsTheJob(t *testing.T) {
	h := newRestartHarness(t, ptr.To[int32](0))
	h.r.lostNodes = LostNodePolicy{Timeout: time.Minute}
	h.create(node("node-a", corev1.ConditionTrue, now.Add(-time.Hour)), node("node-b", corev1.ConditionUnknown, now.Add(-20*time.Second)))
	h.reconcile()
	h.podsRun()
	h.placePods(map[string]string{"train-workerset-ws-1": "node-b"})
	if st := h.reconcile(); st.Phase != troupev1.JobRunning {
		t.Fatalf("phase %s, want Running", st.Phase)
	}
	// Not Ready for 20 s of the 60: the pass asks to look again when the node would be lost.
	if wait := h.wakeAfter(); wait != 40*time.Second {
		t.Fatalf("woken after %v, want 40s (when node-b is lost)", wait)
	}

	h.at(now.Add(41 * time.Second))
	st := h.reconcile()
	if st.Restarts != 1 || restarting(st) != "True/StoppingAttempt" || countedRestarts(st) != 0 {
		t.Fatalf("after node-b was lost: restarts %d (%d counted), Restarting %s", st.Restarts, countedRestarts(st), restarting(st))
	}
	msg := meta.FindStatusCondition(st.Conditions, troupev1.ConditionRestarting).Message
	for _, want := range []string{"worker pod train-workerset-ws-1: node node-b is lost (not Ready since ", "NodeStatusUnknown",
		"kubectl taint nodes node-b node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Restarting message %q lacks %q", msg, want)
		}
	}
	if len(st.RestartsByReason) != 1 || st.RestartsByReason[0] != (troupev1.RestartCount{Reason: troupev1.FailureNodeLost, Count: 1}) {
		t.Errorf("restarts by reason %v, want NodeLost: 1", st.RestartsByReason)
	}

	// Stopping: the pod on node-b stays (the node may still run it).
	h.reconcile()
	if h.pod("train-workerset-ws-1") == nil {
		t.Fatal("the pod of a node only not Ready was deleted without --lost-node-force-delete")
	}
	if e := h.event(troupev1.EventNodeLost); e != "" {
		t.Errorf("event %q for a pod left in place", e)
	}

	// The admin marks node-b out of service (NoExecute): first the taint manager has its turn,
	// whose delete by name could otherwise find the pod's replacement (taintEvictionGrace).
	b := &corev1.Node{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: "node-b"}, b); err != nil {
		t.Fatal(err)
	}
	b.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
	if err := h.c.Update(h.ctx, b); err != nil {
		t.Fatal(err)
	}
	if wait := h.wakeAfter(); wait != taintEvictionGrace {
		t.Errorf("woken after %v, want %v (when the taint manager's turn ends)", wait, taintEvictionGrace)
	}
	if h.pod("train-workerset-ws-1") == nil {
		t.Fatal("the pod of a node just marked out of service was deleted before the taint manager's turn")
	}
	if e := h.event(troupev1.EventNodeLost); e != "" {
		t.Errorf("event %q for a pod left to the taint manager", e)
	}
	// Its turn passed (a pod that tolerates the taint, or no taint eviction): the pod goes at
	// once, told in an event.
	h.at(now.Add(41*time.Second + taintEvictionGrace))
	h.reconcile()
	if h.pod("train-workerset-ws-1") != nil {
		t.Fatal("the pod of a node marked out of service is still there after the taint manager's turn")
	}
	if e := h.event(troupev1.EventNodeLost); !strings.Contains(e, "deleted pod train-workerset-ws-1 at once (grace period 0): node node-b is lost (marked out of service") {
		t.Errorf("NodeLost event %q", e)
	}
}

// A pod the taint manager deleted (Terminating, its grace period running on a node that will
// not end it) goes at once, within the taint manager's turn.
func TestLostNodeAfterTaintEviction(t *testing.T) {
	h := newRestartHarness(t, ptr.To[int32](0))
	h.r.lostNodes = LostNodePolicy{Timeout: time.Minute}
	outOfService := node("node-b", corev1.ConditionUnknown, now.Add(-20*time.Second))
	outOfService.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
	h.create(node("node-a", corev1.ConditionTrue, now.Add(-time.Hour)), outOfService)
	h.reconcile()
	h.podsRun()
	h.placePods(map[string]string{"train-workerset-ws-1": "node-b"})
	h.reconcile()
	if st := h.reconcile(); restarting(st) != "True/StoppingAttempt" {
		t.Fatalf("Restarting %s, want the restart for the lost node", restarting(st))
	}
	h.reconcile()
	if h.pod("train-workerset-ws-1") == nil {
		t.Fatal("deleted before the taint manager's turn")
	}
	// The taint manager deletes it with its grace period; the finalizer holds it for the test.
	p := h.pod("train-workerset-ws-1")
	p.Finalizers = []string{"test/hold"}
	if err := h.c.Update(h.ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(h.ctx, p, client.GracePeriodSeconds(30)); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if e := h.event(troupev1.EventNodeLost); !strings.Contains(e, "deleted pod train-workerset-ws-1 at once (grace period 0): node node-b is lost (marked out of service") {
		t.Errorf("NodeLost event %q, want the Terminating pod deleted at once", e)
	}
}

// With --lost-node-force-delete, a job without a failure policy gets its worker on a lost node
// deleted at once, so that its StatefulSet makes it again; the job is not restarted, and the
// pods on nodes that answer stay.
func TestLostNodeForceDelete(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.r.lostNodes = LostNodePolicy{Timeout: time.Minute, ForceDelete: true}
	h.create(node("node-a", corev1.ConditionTrue, now.Add(-time.Hour)), node("node-b", corev1.ConditionFalse, now.Add(-2*time.Minute)))
	h.reconcile()
	h.podsRun()
	h.placePods(map[string]string{"train-workerset-ws-0": "node-b"})
	st := h.reconcile()
	if h.pod("train-workerset-ws-0") != nil {
		t.Fatal("the pod on the lost node is still there")
	}
	if h.pod("train-workerset-ws-1") == nil || h.pod("train-master-abc") == nil {
		t.Fatal("a pod on a node that answers was deleted")
	}
	if st.Restarts != 0 {
		t.Errorf("restarts %d without a failure policy", st.Restarts)
	}
	if e := h.event(troupev1.EventNodeLost); !strings.Contains(e, "deleted pod train-workerset-ws-0 at once") || strings.Contains(e, "kubectl taint") {
		t.Errorf("NodeLost event %q", e)
	}
}

// A pod whose Node object is gone is deleted at once without --lost-node-force-delete: nothing
// can run it any more. A launcher there fails the attempt (its Job would wait for it forever).
func TestLostNodeGoneMaster(t *testing.T) {
	h := newRestartHarness(t, ptr.To[int32](1))
	h.r.lostNodes = LostNodePolicy{Timeout: time.Minute}
	h.create(node("node-a", corev1.ConditionTrue, now.Add(-time.Hour)))
	h.reconcile()
	h.podsRun()
	h.placePods(map[string]string{"train-master-abc0": "node-gone"})
	st := h.reconcile()
	if st.Restarts != 1 || restarting(st) != "True/StoppingAttempt" {
		t.Fatalf("restarts %d, Restarting %s", st.Restarts, restarting(st))
	}
	if msg := meta.FindStatusCondition(st.Conditions, troupev1.ConditionRestarting).Message; !strings.Contains(msg, "master pod train-master-abc0: node node-gone is lost (its Node object is gone)") {
		t.Errorf("Restarting message %q", msg)
	}
	if h.pod("train-master-abc0") == nil {
		t.Fatal("the pod went in the pass that records the failure")
	}
	h.reconcile()
	if h.pod("train-master-abc0") != nil {
		t.Fatal("the launcher pod of a gone node is still there")
	}
}

// Without a timeout the engine reads no node: a pod on a node long not Ready is left alone.
func TestLostNodesOff(t *testing.T) {
	h := newRestartHarness(t, ptr.To[int32](1))
	h.create(node("node-b", corev1.ConditionUnknown, now.Add(-time.Hour)))
	h.reconcile()
	h.podsRun()
	h.placePods(map[string]string{"train-workerset-ws-1": "node-b"})
	if st := h.reconcile(); st.Restarts != 0 || h.pod("train-workerset-ws-1") == nil {
		t.Fatalf("restarts %d, pod there %v", st.Restarts, h.pod("train-workerset-ws-1") != nil)
	}
}

// WorkersReady names the lost node of a job that does not restart: its pods do not say it
// themselves (their kubelet no longer updates them).
func TestWorkersReadyNamesTheLostNode(t *testing.T) {
	h := newRestartHarness(t, nil)
	h.r.lostNodes = LostNodePolicy{Timeout: time.Minute}
	h.create(node("node-a", corev1.ConditionTrue, now.Add(-time.Hour)), node("node-b", corev1.ConditionUnknown, now.Add(-time.Hour)))
	h.reconcile()
	h.podsRun()
	h.placePods(map[string]string{"train-workerset-ws-1": "node-b"})
	p := h.pod("train-workerset-ws-1")
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if err := h.c.Status().Update(h.ctx, p); err != nil {
		t.Fatal(err)
	}
	sts := h.workers()
	sts.Status.ReadyReplicas = 1
	if err := h.c.Status().Update(h.ctx, sts); err != nil {
		t.Fatal(err)
	}
	st := h.reconcile()
	c := meta.FindStatusCondition(st.Conditions, troupev1.ConditionWorkersReady)
	if c == nil || c.Reason != troupev1.ReasonNodeLost || !strings.Contains(c.Message, "ws: NodeLost on pod (train-workerset-ws-1): train-workerset-ws-1: node node-b is lost") {
		t.Fatalf("WorkersReady %+v", c)
	}
}

// Only a change of what makes a node lost wakes jobs: not a heartbeat.
func TestNodeHealthChanged(t *testing.T) {
	base := node("n", corev1.ConditionTrue, now.Time)
	heartbeat := base.DeepCopy()
	heartbeat.ResourceVersion = "2"
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(now.Add(time.Minute))
	unknown := node("n", corev1.ConditionUnknown, now.Add(time.Minute))
	outOfService := base.DeepCopy()
	outOfService.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}}
	for name, tc := range map[string]struct {
		to   *corev1.Node
		want bool
	}{"heartbeat": {heartbeat, false}, "not ready": {unknown, true}, "out of service": {outOfService, true}} {
		if got := nodeHealthChanged.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: tc.to}); got != tc.want {
			t.Errorf("%s: woken %v, want %v", name, got, tc.want)
		}
	}
	trimmed, _ := trimNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: types.UID("u"), Labels: map[string]string{"a": "b"}},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"big"}}}, Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	if n := trimmed.(*corev1.Node); len(n.Status.Images) != 0 || len(n.Labels) != 0 || len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Type != corev1.NodeReady {
		t.Errorf("trimmed node %+v", n)
	}
}
