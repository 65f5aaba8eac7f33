package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// mpiName is the MPIJob kind's name label: the pods of these tests are an MPIJob's.
var mpiName = troupev1.NameLabel("MPIJob")

func TestPodChangedPassesWhatTheEngineReads(t *testing.T) {
	podChanged := podChanged(mpiName)
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: "j-workerset-ws0-0", Namespace: "ml", ResourceVersion: "1",
				Labels:      map[string]string{troupev1.LabelJobUID: "uid-1", troupev1.LabelRole: troupev1.RoleWorker, mpiName: "j"},
				Annotations: map[string]string{"note": "a"},
			},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main", Image: "i:1"}}},
			Status: corev1.PodStatus{
				Phase:      corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "wait",
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, ImageID: "sha:1"}},
				PodIP:             "10.0.0.1",
			},
		}
	}
	tests := map[string]struct {
		change func(p *corev1.Pod)
		want   bool
		// dropped: trimPod drops what changed, so the engine reads the same pod and the cache,
		// which hands on both versions trimmed, queues no pass.
		dropped bool
	}{
		"resourceVersion only":    {change: func(p *corev1.Pod) { p.ResourceVersion = "2" }, want: false},
		"an annotation":           {change: func(p *corev1.Pod) { p.Annotations["note"] = "b" }, want: false},
		"the pod IP":              {change: func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.2" }, want: false},
		"a container's image ID":  {change: func(p *corev1.Pod) { p.Status.ContainerStatuses[0].ImageID = "sha:2" }, want: false},
		"the phase":               {change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, want: true},
		"the reason":              {change: func(p *corev1.Pod) { p.Status.Reason = "Evicted" }, want: true},
		"a container's readiness": {change: func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = false }, want: true},
		"a container's restarts":  {change: func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = 1 }, want: true},
		"the Ready condition":     {change: func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }, want: true},
		"a DisruptionTarget added": {change: func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue})
		}, want: true},
		"a label of troupe's":   {change: func(p *corev1.Pod) { p.Labels[troupev1.LabelRestartAttempt] = "1" }, want: true},
		"the kind's name label": {change: func(p *corev1.Pod) { p.Labels[mpiName] = "k" }, want: true},
		"relabelled away":       {change: func(p *corev1.Pod) { delete(p.Labels, mpiName) }, want: true},
		"another's label": {change: func(p *corev1.Pod) { p.Labels["controller-revision-hash"] = "x" }, want: true,
			dropped: true},
		"another condition": {change: func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue})
		}, want: true, dropped: true},
		"a condition's probe and transition times": {change: func(p *corev1.Pod) {
			p.Status.Conditions[0].LastProbeTime, p.Status.Conditions[0].LastTransitionTime = metav1.Now(), metav1.Now()
		}, want: true, dropped: true},
		"the node": {change: func(p *corev1.Pod) { p.Spec.NodeName = "n2" }, want: true},
		"deletion": {change: func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }, want: true},
		"an init container started": {change: func(p *corev1.Pod) {
			p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
		}, want: true},
		"an init container ended": {change: func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "wait", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
		}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// As the cache hands them on: trimmed.
			older, newer := base(), base()
			tc.change(newer)
			o, _ := trimPod(older)
			n, _ := trimPod(newer)
			want := tc.want && !tc.dropped
			if got := podChanged.Update(event.UpdateEvent{ObjectOld: o.(client.Object), ObjectNew: n.(client.Object)}); got != want {
				t.Errorf("update passed = %t, want %t", got, want)
			}
			// Pods from a source without the cache are compared as the cache would hold them.
			if got := podChanged.Update(event.UpdateEvent{ObjectOld: older, ObjectNew: newer}); got != want {
				t.Errorf("untrimmed: update passed = %t, want %t", got, want)
			}
		})
	}
	if !podChanged.Create(event.CreateEvent{Object: base()}) || !podChanged.Delete(event.DeleteEvent{Object: base()}) {
		t.Error("a pod's create or delete was filtered out")
	}
	// A pod of another kind's job is not this kind's to pass: not its create, update or delete.
	other := func() *corev1.Pod {
		p := base()
		delete(p.Labels, mpiName)
		p.Labels[troupev1.NameLabel("PyTorchJob")] = "j"
		return p
	}
	changedPhase := other()
	changedPhase.Status.Phase = corev1.PodFailed
	if podChanged.Create(event.CreateEvent{Object: other()}) || podChanged.Delete(event.DeleteEvent{Object: other()}) ||
		podChanged.Update(event.UpdateEvent{ObjectOld: other(), ObjectNew: changedPhase}) {
		t.Error("a pod of another kind's job passed the MPIJob kind's filter")
	}
}

// resourceVersionOnlyUpdate is an update of an MPIJob's running worker pod, both versions
// trimmed as the cache hands them on, in which only the resourceVersion moved.
func resourceVersionOnlyUpdate() event.UpdateEvent {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "j-workerset-ws0-0", Namespace: "ml", ResourceVersion: "1",
			Labels: map[string]string{troupev1.LabelJobUID: "uid-1", troupev1.LabelRole: troupev1.RoleWorker, mpiName: "j"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true}}},
	}
	o, _ := trimPod(pod)
	n, _ := trimPod(pod)
	n.(*cachedPod).ResourceVersion = "2"
	return event.UpdateEvent{ObjectOld: o.(client.Object), ObjectNew: n.(client.Object)}
}

// BenchmarkPodChanged is the cost of the pod watch's filter on one update of a trimmed pod, as
// the cache hands it on: it runs on every update of every pod of every job.
func BenchmarkPodChanged(b *testing.B) {
	e := resourceVersionOnlyUpdate()
	podChanged := podChanged(mpiName)
	b.ReportAllocs()
	for b.Loop() {
		if podChanged.Update(e) {
			b.Fatal("an update of the resourceVersion alone passed")
		}
	}
}

// BenchmarkPodUpdateEveryKind is the cost of one pod update to the pod watches of all four
// kinds' controllers, which share the informer: the pod's own kind compares its versions, the
// three others only look for their name label.
func BenchmarkPodUpdateEveryKind(b *testing.B) {
	e := resourceVersionOnlyUpdate()
	var filters []func(event.UpdateEvent) bool
	for _, kind := range []string{"MPIJob", "PyTorchJob", "HorovodJob", "ChainerJob"} {
		filters = append(filters, podChanged(troupev1.NameLabel(kind)).Update)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, passes := range filters {
			if passes(e) {
				b.Fatal("an update of the resourceVersion alone passed")
			}
		}
	}
}
