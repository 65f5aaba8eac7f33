package engine

import (
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lost nodes (docs/failure-handling.md, "Lost nodes"). A node that stops answering leaves its
// pods as they were: Running in the API, then, once the taint manager evicts them (after their
// 300 s toleration), Terminating for as long as no kubelet confirms they stopped. Meanwhile a
// worker StatefulSet cannot make a pod's replacement under the same name, and a restart waits
// for every pod of the old attempt: the job freezes. So the engine reads the nodes its jobs'
// pods are on. A node is lost once its Ready condition has not been True for
// LostNodePolicy.Timeout, or its Node object is gone, or an admin marked it out of service.
// Its pods count as lost with reason NodeLost (a disruption), and they are deleted at once
// (grace period 0) where nothing can still run them: the node is gone or out of service, or
// the operator was told to take that risk (LostNodePolicy.ForceDelete).

// Nodes are cluster-scoped: the cluster-wide install's ClusterRole troupe-operator grants
// reading them; the namespace-scoped install, whose Roles cannot, runs without (timeout 0).
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// LostNodePolicy is how the engine treats the pods of a node that stopped answering.
type LostNodePolicy struct {
	// Timeout is how long a node's Ready condition may be other than True before its pods are
	// lost; 0 leaves nodes alone (and the engine then reads none).
	Timeout time.Duration
	// ForceDelete deletes a lost node's pods at once, while the node may still run them (a
	// network partition): their volumes may be attached twice and their processes meet their
	// replacements' peers. Off, only the pods of a node gone or marked out of service are.
	ForceDelete bool
}

// lostNode is a node the engine counts as lost, with a job's pods on it.
type lostNode struct {
	Name string
	// Why says how it was lost, for messages: "its Node object is gone", "marked out of
	// service", or "not Ready since ... (reason: message)".
	Why string
	// Removable: its pods may be deleted at once (the node is gone or out of service, or the
	// policy says ForceDelete).
	Removable bool
	// TaintEvicting: the node's out-of-service taint is NoExecute and came less than
	// taintEvictionGrace ago: its pods are left to the taint manager's delete until then, and
	// deleted at once only once Terminating (podsToRemove).
	TaintEvicting bool
}

// taintEvictionGrace is how long the engine leaves the pods of a node marked out of service
// with a NoExecute taint to kube-controller-manager's taint eviction, which deletes at once every
// pod that does not tolerate the taint, by its name: had the engine deleted a worker first, the
// replacement its StatefulSet makes under the same name a moment later could be the pod that
// delete finds (Kubernetes v1.35 deletes without the pod's UID), and the new attempt would
// lose that worker and restart again. Once the taint manager has deleted a pod (it is
// Terminating) the engine deletes it at once (grace period 0), as before; a pod that tolerates
// the taint, or a cluster without taint eviction, waits this long first.
const taintEvictionGrace = 10 * time.Second

// outOfServiceSeen remembers when this process first saw each node marked out of service, for
// taintEvictionGrace (a taint carries no time of its own unless its writer set one). Memory
// only: after a restart the grace starts again. An entry goes once a pass sees the node no
// longer marked, or an hour after it was made (nodes deleted while marked).
type outOfServiceSeen struct {
	mu    sync.Mutex
	nodes map[string]time.Time
}

// since is when node was first seen out of service (now, if this is the first time).
func (o *outOfServiceSeen) since(node string, now time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.nodes == nil {
		o.nodes = map[string]time.Time{}
	}
	for name, at := range o.nodes {
		if now.Sub(at) > time.Hour {
			delete(o.nodes, name)
		}
	}
	at, ok := o.nodes[node]
	if !ok {
		at, o.nodes[node] = now, now
	}
	return at
}

// back forgets node: it is no longer marked out of service.
func (o *outOfServiceSeen) back(node string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.nodes, node)
}

// taintEvicts: the node's out-of-service taint is NoExecute, so the taint manager deletes the
// pods that do not tolerate it.
func taintEvicts(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeOutOfService && t.Effect == corev1.TaintEffectNoExecute
	})
}

// String is the node as a message names it, with the way out when its pods stay.
func (l lostNode) String() string {
	s := fmt.Sprintf("node %s is lost (%s)", l.Name, l.Why)
	if !l.Removable {
		s += fmt.Sprintf("; its pods stay until it is Ready again or marked out of service once shut down "+
			"(kubectl taint nodes %s %s=nodeshutdown:NoExecute)", l.Name, corev1.TaintNodeOutOfService)
	}
	return s
}

// nodeLoss says whether node is lost at now under policy; when it is not Ready but not yet
// lost, wait is how long until it is.
func nodeLoss(node *corev1.Node, policy LostNodePolicy, now time.Time) (l lostNode, lost bool, wait time.Duration) {
	l.Name = node.Name
	if outOfService(node) {
		l.Why, l.Removable = "marked out of service: taint "+corev1.TaintNodeOutOfService, true
		return l, true, 0
	}
	ready := readyCondition(node)
	if ready == nil || ready.Status == corev1.ConditionTrue {
		return l, false, 0 // a node that has not reported yet is not lost
	}
	if left := ready.LastTransitionTime.Add(policy.Timeout).Sub(now); left > 0 {
		return l, false, left
	}
	l.Why = fmt.Sprintf("not Ready since %s", ready.LastTransitionTime.UTC().Format(time.RFC3339))
	if ready.Reason != "" {
		l.Why += fmt.Sprintf(", %s: %s", ready.Reason, fitBytes(ready.Message, maxCauseText))
	}
	l.Removable = policy.ForceDelete
	return l, true, 0
}

// outOfService says an admin marked the node out of service (confirmed shut down).
func outOfService(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService })
}

// readyCondition is the node's Ready condition, nil when it has none.
func readyCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// trimNode keeps what the engine reads of a node: its name, its Ready condition and its taints
// (out of service). Nodes carry their images and more in their status; the cache holds a few
// hundred bytes of each.
func trimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Node{
		TypeMeta:   node.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion},
		Spec:       corev1.NodeSpec{Taints: node.Spec.Taints},
	}
	if c := readyCondition(node); c != nil {
		trimmed.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason,
			Message: fitBytes(c.Message, maxCauseText), LastTransitionTime: c.LastTransitionTime}}
	}
	return trimmed, nil
}

// nodeNameField indexes the operator's cached pods by the node they are on.
const nodeNameField = "spec.nodeName"
