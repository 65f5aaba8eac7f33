package engine

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// cachedPod is how the operator's cache holds a troupe pod (trimPod): the fields the engine
// reads and nothing else. A corev1.Pod is 1,168 bytes before any field is set, a container's
// status 208 and a condition 120; a record is 368 bytes and a container's 56, and a running
// worker with its labels about 1 KB where its trimmed corev1.Pod took 2.25 KB
// (docs/performance.md, "The compact pod store").
//
// The engine reads pods as corev1.Pods: the cache's reader deep-copies what it returns, and a
// record's copy (DeepCopyObject) is the corev1.Pod it stands for, built afresh, so a List or
// Get of pods through the manager's client fills a corev1.PodList as before, in every cache
// mode (one namespace, several, all). The watch's handlers get the records themselves (asPod).
type cachedPod struct {
	metav1.ObjectMeta
	nodeName string
	phase    corev1.PodPhase
	reason   string
	// ready is the status of the pod's Ready condition when that is the only condition kept
	// and it has neither reason nor message: a running pod's usual case. Otherwise conditions
	// holds what engineConditions keeps, in the pod's order.
	ready          corev1.ConditionStatus
	conditions     []corev1.PodCondition
	initContainers []cachedContainer
	containers     []cachedContainer
}

// cachedContainer is what the engine reads of a container's status (newCachedPod says which).
type cachedContainer struct {
	name           string
	restartCount   int32
	ready          bool
	runningSince   *metav1.Time
	waiting        *corev1.ContainerStateWaiting
	terminated     *corev1.ContainerStateTerminated
	lastTerminated *corev1.ContainerStateTerminated
}

// newCachedPod keeps what the engine reads of a pod: identity, troupe's labels, its controller,
// node, phase and reason, the Ready and DisruptionTarget conditions without their times,
// restart counts, and what says why a pod does not run (waiting reasons, last exits, an
// Unschedulable PodScheduled condition, each message cut to maxCauseText bytes, a log's end
// kept). Not the spec, the rest of the status or the labels of others (the StatefulSet and Job
// controllers', the user's), which make up most of a pod's size.
func newCachedPod(pod *corev1.Pod) *cachedPod {
	c := &cachedPod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         shared(pod.Namespace),
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Generation:        pod.Generation,
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
			// 0 once deleted at once (podsToRemove).
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Labels:                     labelsRead(pod.Labels),
			OwnerReferences:            sharedRefs(controllerOnly(pod.OwnerReferences)),
		},
		nodeName: shared(pod.Spec.NodeName),
		phase:    corev1.PodPhase(shared(string(pod.Status.Phase))),
		reason:   pod.Status.Reason,
	}
	kept := engineConditions(pod.Status.Conditions)
	if len(kept) == 1 && kept[0].Type == corev1.PodReady && kept[0].Reason == "" && kept[0].Message == "" {
		c.ready = kept[0].Status
	} else {
		c.conditions = kept
	}
	// Init containers: the terminated state says why a pod failed before its main containers
	// started (for example a launcher whose wait for its workers timed out), and how long the
	// launcher's wait took (troupe_launcher_wait_seconds).
	for _, cs := range pod.Status.InitContainerStatuses {
		kept := cachedContainer{name: shared(cs.Name), restartCount: cs.RestartCount}
		// Running: the launcher waits for its workers now (the LauncherWaiting condition).
		if r := cs.State.Running; r != nil {
			kept.runningSince = ptr.To(r.StartedAt)
		}
		if t := cs.State.Terminated; t != nil {
			kept.terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message,
				StartedAt: t.StartedAt, FinishedAt: t.FinishedAt}
		}
		keepWhyNotRunning(&kept, cs)
		c.initContainers = append(c.initContainers, kept)
	}
	master := pod.Labels[troupev1.LabelRole] == troupev1.RoleMaster
	for _, cs := range pod.Status.ContainerStatuses {
		kept := cachedContainer{name: shared(cs.Name), ready: cs.Ready, restartCount: cs.RestartCount}
		switch t := cs.State.Terminated; {
		case t != nil && master:
			// A master's (launcher's) exit: the Failed condition quotes it (masterExitMessage),
			// and its end is the job's completion time when its success comes before the Job's
			// (masterVerdict).
			kept.terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message,
				FinishedAt: t.FinishedAt}
		case t != nil:
			kept.terminated = boundedExit(t)
		}
		keepWhyNotRunning(&kept, cs)
		c.containers = append(c.containers, kept)
	}
	return c
}

// keepWhyNotRunning keeps, of a container's status, what says why it does not run (causes.go):
// the kubelet's waiting reason with the start of its message, and how it ended before its last
// restart, with the end of its termination message (the end of a log says why it exited).
func keepWhyNotRunning(kept *cachedContainer, cs corev1.ContainerStatus) {
	if w := cs.State.Waiting; w != nil {
		kept.waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: fitBytes(w.Message, maxCauseText)}
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		kept.lastTerminated = boundedExit(t)
	}
}

// boundedExit is the exit code, reason and the end of the message of a termination; not its
// times, which would make every restart of a container a change of its own.
func boundedExit(t *corev1.ContainerStateTerminated) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, Message: lastBytes(t.Message)}
}

// controllerOnly keeps the controller of an object's owner references: the one the engine
// reads (metav1.IsControlledBy); the API server allows at most one.
func controllerOnly(refs []metav1.OwnerReference) []metav1.OwnerReference {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return []metav1.OwnerReference{r}
		}
	}
	return nil
}

// engineConditions are the pod conditions the engine reads, without their times: Ready (the
// WorkersReady condition, the ready counts) and DisruptionTarget (a worker evicted or preempted
// restarts the job without counting a failure).
func engineConditions(conds []corev1.PodCondition) []corev1.PodCondition {
	var kept []corev1.PodCondition
	for _, c := range conds {
		// PodScheduled only while the scheduler cannot place the pod: its message says why.
		unschedulable := c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse
		if c.Type == corev1.PodReady || c.Type == corev1.DisruptionTarget || unschedulable {
			// Not their probe and transition times, which the engine does not read: the
			// kubelet rewrites them without a change of the condition.
			kept = append(kept, corev1.PodCondition{Type: c.Type, Status: corev1.ConditionStatus(shared(string(c.Status))),
				Reason: c.Reason, Message: fitBytes(c.Message, maxCauseText)})
		}
	}
	return kept
}

// pod is the corev1.Pod the record stands for, sharing no memory with it.
func (c *cachedPod) pod() *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: *c.DeepCopy(), // ObjectMeta's: a cachedPod has no DeepCopy of its own
		Spec:       corev1.PodSpec{NodeName: c.nodeName},
		Status:     corev1.PodStatus{Phase: c.phase, Reason: c.reason},
	}
	if c.ready != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: c.ready}}
	} else if c.conditions != nil {
		p.Status.Conditions = append([]corev1.PodCondition(nil), c.conditions...)
	}
	p.Status.InitContainerStatuses = containerStatuses(c.initContainers)
	p.Status.ContainerStatuses = containerStatuses(c.containers)
	return p
}

func containerStatuses(kept []cachedContainer) []corev1.ContainerStatus {
	if kept == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(kept))
	for i, k := range kept {
		out[i] = corev1.ContainerStatus{Name: k.name, Ready: k.ready, RestartCount: k.restartCount}
		if k.runningSince != nil {
			out[i].State.Running = &corev1.ContainerStateRunning{StartedAt: *k.runningSince}
		}
		out[i].State.Waiting = k.waiting.DeepCopy()
		out[i].State.Terminated = k.terminated.DeepCopy()
		out[i].LastTerminationState.Terminated = k.lastTerminated.DeepCopy()
	}
	return out
}

// DeepCopyObject is the corev1.Pod the record stands for (see cachedPod): what the cache's
// reader hands the engine.
func (c *cachedPod) DeepCopyObject() runtime.Object { return c.pod() }

// GetObjectKind: a record carries no type of its own; the cache's reader sets the copy's.
func (c *cachedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// phaseOf is the phase of a pod the watch handed over, read without expanding the cache's
// record (asPod copies all of it): the pod watch's handlers ask it of every update.
func phaseOf(o client.Object) (corev1.PodPhase, bool) {
	switch p := o.(type) {
	case *cachedPod:
		return p.phase, true
	case *corev1.Pod:
		return p.Status.Phase, true
	}
	return "", false
}

// asPod is a pod the watch handed over as a corev1.Pod: the cache's record expanded, or the
// pod itself where no cache stands between (tests' sources).
func asPod(o client.Object) (*corev1.Pod, bool) {
	switch p := o.(type) {
	case *cachedPod:
		return p.pod(), true
	case *corev1.Pod:
		return p, true
	}
	return nil, false
}

// cachedForm is a pod as the cache holds it: the record itself, or a corev1.Pod trimmed.
func cachedForm(o client.Object) (*cachedPod, bool) {
	switch p := o.(type) {
	case *cachedPod:
		return p, true
	case *corev1.Pod:
		return newCachedPod(p), true
	}
	return nil, false
}

// sameForEngine reports whether two versions of a pod agree on all the engine reads of them,
// that is on all their records hold but the resourceVersion. Both come from the same decoding,
// so reflect's equality is exact for them.
func sameForEngine(a, b *cachedPod) bool {
	if a.ResourceVersion == b.ResourceVersion {
		return reflect.DeepEqual(a, b)
	}
	bb := *b // a shallow copy: only its resourceVersion differs from b
	bb.ResourceVersion = a.ResourceVersion
	return reflect.DeepEqual(a, &bb)
}
