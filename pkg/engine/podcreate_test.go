package engine

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// A StatefulSet short of pods and a running master Job without a pod lack pods; a suspended or
// finished master Job, or one with its pod, does not; nor does a child its controller has not
// synced yet (no refusal can have been recorded for it), or a set whose pods the cache holds.
func TestChildrenLackingPods(t *testing.T) {
	sts := func(name string, want, have int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(want)},
			Status: appsv1.StatefulSetStatus{Replicas: have, ObservedGeneration: 1}}
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j-launcher"}, Status: batchv1.JobStatus{Ready: ptr.To[int32](0)}}
	masterPod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{troupev1.LabelRole: troupev1.RoleMaster}}}
	names := func(obs *Observed) (out []string) {
		for _, o := range childrenLackingPods(obs) {
			out = append(out, o.GetName())
		}
		return out
	}
	obs := &Observed{MasterJob: job, StatefulSets: map[string]*appsv1.StatefulSet{"b": sts("j-b", 2, 1), "a": sts("j-a", 1, 1)}}
	if got := names(obs); len(got) != 2 || got[0] != "j-b" || got[1] != "j-launcher" {
		t.Errorf("lacking pods: %v, want [j-b j-launcher]", got)
	}
	obs.setPods([]corev1.Pod{masterPod})
	if got := names(obs); len(got) != 1 {
		t.Errorf("with the master's pod: %v, want [j-b]", got)
	}
	obs.setPods(nil)
	job.Spec.Suspend = ptr.To(true)
	if got := names(obs); len(got) != 1 {
		t.Errorf("suspended master: %v, want [j-b]", got)
	}
	job.Spec.Suspend = nil
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if got := names(obs); len(got) != 1 {
		t.Errorf("finished master: %v, want [j-b]", got)
	}

	// Not synced yet: a set scaled up (generation 2) its controller saw at generation 1, a new
	// master Job without a status. Once synced, they lack pods again.
	job.Status = batchv1.JobStatus{}
	obs.StatefulSets["b"].Generation = 2
	if got := names(obs); len(got) != 0 {
		t.Errorf("children their controllers have not synced: %v, want none", got)
	}
	obs.StatefulSets["b"].Status.ObservedGeneration = 2
	job.Status.StartTime = ptr.To(metav1.Now())
	if got := names(obs); len(got) != 2 {
		t.Errorf("synced: %v, want [j-b j-launcher]", got)
	}

	// The set's controller has not counted the pods it just made, but the cache holds them.
	worker := func(name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{troupev1.LabelRole: troupev1.RoleWorker, troupev1.LabelWorkerSet: "b"}}}
	}
	obs.setPods([]corev1.Pod{worker("j-b-0")})
	if got := names(obs); len(got) != 2 {
		t.Errorf("one of the set's two pods cached: %v, want [j-b j-launcher]", got)
	}
	obs.setPods([]corev1.Pod{worker("j-b-0"), worker("j-b-1")})
	if got := names(obs); len(got) != 1 || got[0] != "j-launcher" {
		t.Errorf("the set's pods cached, not yet counted: %v, want [j-launcher]", got)
	}
}

// The newest refusal is reported, by whichever time its writer keeps.
func TestNewestEvent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	events := []corev1.Event{
		{Message: "old", LastTimestamp: metav1.NewTime(t0)},
		{Message: "series", LastTimestamp: metav1.NewTime(t0), Series: &corev1.EventSeries{LastObservedTime: metav1.NewMicroTime(t0.Add(2 * time.Minute))}},
		{Message: "new", LastTimestamp: metav1.NewTime(t0.Add(time.Minute))},
	}
	if got := newestEvent(events); got == nil || got.Message != "series" {
		t.Errorf("newest = %v, want the series", got)
	}
}

// Refused pods make ReplicaFailure True with the API server's words, before failed pods.
func TestReplicaFailureOfRefusedPods(t *testing.T) {
	failed := replicaFailureCondition(nil, nil)
	if c := withPodCreateFailures(&Observed{}, failed); c.Reason != troupev1.ReasonNoPodFailures {
		t.Errorf("nothing refused: %+v", c)
	}
	c := withPodCreateFailures(&Observed{PodCreateFailures: []string{`StatefulSet j-worker: pods "j-worker-0" is forbidden: exceeded quota`}}, failed)
	if c.Status != metav1.ConditionTrue || c.Reason != troupev1.ReasonFailedCreate ||
		c.Message != `the API server refused pods: StatefulSet j-worker: pods "j-worker-0" is forbidden: exceeded quota` {
		t.Errorf("refused: %+v", c)
	}
}
