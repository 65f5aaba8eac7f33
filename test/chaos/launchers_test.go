package main

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// pod is a launcher pod created at t0+created, its container finished at t0+finished (< 0:
// still running).
func pod(created, finished time.Duration) *seenPod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0.Add(created))}}
	if finished >= 0 {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(t0.Add(finished))}}}}
	}
	return &seenPod{pod: p}
}

func TestOverlaps(t *testing.T) {
	for name, tc := range map[string]struct {
		pods []*seenPod
		want int
	}{
		"one pod":                             {[]*seenPod{pod(0, 5*time.Second)}, 0},
		"a retry after the failure":           {[]*seenPod{pod(0, 5*time.Second), pod(15*time.Second, -1)}, 0},
		"a retry in the failure's second":     {[]*seenPod{pod(0, 5*time.Second), pod(5*time.Second, -1)}, 0},
		"a second pod while one runs":         {[]*seenPod{pod(0, -1), pod(3*time.Second, -1)}, 1},
		"a second pod before the first ended": {[]*seenPod{pod(0, 9*time.Second), pod(3*time.Second, 20*time.Second)}, 1},
		"a pod whose deletion was asked before the next": {[]*seenPod{
			func() *seenPod {
				p := pod(0, -1)
				p.pod.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(32 * time.Second)))
				p.pod.DeletionGracePeriodSeconds = ptr.To[int64](30)
				return p
			}(), pod(3*time.Second, -1)}, 0},
		"a failure seen before the next, its finishedAt written again later": {[]*seenPod{
			func() *seenPod { p := pod(0, 11*time.Second); p.seenEnded = t0.Add(3 * time.Second); return p }(),
			pod(4*time.Second, -1)}, 0},
		"a failure seen after the next was made": {[]*seenPod{
			func() *seenPod { p := pod(0, 9*time.Second); p.seenEnded = t0.Add(10 * time.Second); return p }(),
			pod(4*time.Second, -1)}, 1},
		"a pod that ended unseen, last seen running before the next": {[]*seenPod{
			func() *seenPod { p := pod(0, -1); p.gone, p.lastLive = true, t0.Add(time.Second); return p }(),
			pod(4*time.Second, -1)}, 0},
		"a pod that ended unseen, last seen running after the next was made": {[]*seenPod{
			func() *seenPod { p := pod(0, -1); p.gone, p.lastLive = true, t0.Add(9*time.Second); return p }(),
			pod(4*time.Second, -1)}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			if got := len(overlapping(tc.pods)); got != tc.want {
				t.Errorf("overlaps = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(ds, 99); got != 99*time.Millisecond {
		t.Errorf("p99 = %v, want 99ms", got)
	}
	if got := percentile(ds, 50); got != 50*time.Millisecond {
		t.Errorf("p50 = %v, want 50ms", got)
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %v", got)
	}
}

// launcher is a launcher pod of job uid and batch Job jobUID, created at t0+created and
// finished at t0+finished (< 0: running).
func launcher(job, jobUID types.UID, created, finished time.Duration) *seenPod {
	p := pod(created, finished)
	p.pod.UID = types.UID(fmt.Sprintf("%s-%s-%d", job, jobUID, created))
	p.pod.Name = fmt.Sprintf("p-%s", created)
	p.pod.Labels = map[string]string{troupev1.LabelJobUID: string(job)}
	p.pod.OwnerReferences = []metav1.OwnerReference{{UID: jobUID, Controller: ptr.To(true), Kind: "Job", Name: "j"}}
	return p
}

func watchOf(pods []*seenPod, jobs map[types.UID]types.UID) *launcherWatch {
	w := &launcherWatch{pods: map[types.UID]*seenPod{}, jobs: map[types.UID]*seenJob{}}
	for _, p := range pods {
		w.pods[p.pod.UID] = p
	}
	for jobUID, job := range jobs {
		w.jobs[jobUID] = &seenJob{job: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: jobUID,
			Labels: map[string]string{troupev1.LabelJobUID: string(job)}}}}
	}
	return w
}

func passOf(ns string, uid types.UID, completion time.Time, kind string) *pass {
	p := &pass{ns: ns, jobs: map[string]*jobState{"a": {shape: shape{Kind: kind, Name: "a"}, uid: uid, completion: completion}}}
	return p
}

// A launcher Job made again though nothing deleted it, and a launcher pod after the job
// completed, are duplicates; a Job the tamperer deleted and the operator made again is not.
func TestDuplicates(t *testing.T) {
	calm := passOf("calm", "c", t0.Add(30*time.Second), "MPIJob")
	calmWatch := watchOf([]*seenPod{launcher("c", "cj1", 0, 30*time.Second)}, map[types.UID]types.UID{"cj1": "c"})
	for name, tc := range map[string]struct {
		pods    []*seenPod
		jobs    map[types.UID]types.UID
		tampers []tamperResult
		// removed: the Job controller's deletions, "job/pod".
		removed func(job, pod string) bool
		// duringRestart: the moments of an API server restart.
		duringRestart  func(time.Time) bool
		want, wantKube int
	}{
		"as without faults": {
			pods: []*seenPod{launcher("f", "fj1", 0, 30*time.Second)},
			jobs: map[types.UID]types.UID{"fj1": "f"},
		},
		"a second launcher Job": {
			pods: []*seenPod{launcher("f", "fj1", 0, 10*time.Second), launcher("f", "fj2", 12*time.Second, 29*time.Second)},
			jobs: map[types.UID]types.UID{"fj1": "f", "fj2": "f"},
			want: 1,
		},
		"a second launcher Job after the tamperer deleted the first": {
			pods:    []*seenPod{launcher("f", "fj1", 0, 10*time.Second), launcher("f", "fj2", 12*time.Second, 29*time.Second)},
			jobs:    map[types.UID]types.UID{"fj1": "f", "fj2": "f"},
			tampers: []tamperResult{{Action: "delete-master-job", Target: target{Kind: "MPIJob", Name: "a"}, Restored: true}},
		},
		"two pods of one launcher Job at once": {
			pods: []*seenPod{launcher("f", "fj1", 0, -1), launcher("f", "fj1", 2*time.Second, 9*time.Second)},
			jobs: map[types.UID]types.UID{"fj1": "f"},
			want: 1,
		},
		"two pods of one launcher Job at once, one removed by the Job controller": {
			pods:     []*seenPod{launcher("f", "fj1", 0, -1), launcher("f", "fj1", 2*time.Second, 9*time.Second)},
			jobs:     map[types.UID]types.UID{"fj1": "f"},
			removed:  func(job, pod string) bool { return job == "j" && pod == "p-2s" },
			wantKube: 1,
		},
		"two pods of one launcher Job at once, the second made during an API server restart": {
			pods:          []*seenPod{launcher("f", "fj1", 0, 20*time.Second), launcher("f", "fj1", 2*time.Second, 9*time.Second)},
			jobs:          map[types.UID]types.UID{"fj1": "f"},
			duringRestart: func(t time.Time) bool { return !t.Before(t0.Add(time.Second)) && t.Before(t0.Add(5*time.Second)) },
			wantKube:      1,
		},
		"two pods of one launcher Job at once, the restart over before the second": {
			pods:          []*seenPod{launcher("f", "fj1", 0, 20*time.Second), launcher("f", "fj1", 7*time.Second, 9*time.Second)},
			jobs:          map[types.UID]types.UID{"fj1": "f"},
			duringRestart: func(t time.Time) bool { return !t.Before(t0.Add(time.Second)) && t.Before(t0.Add(5*time.Second)) },
			want:          1,
		},
		"a launcher pod after completion": {
			pods: []*seenPod{launcher("f", "fj1", 0, 30*time.Second), launcher("f", "fj1", 35*time.Second, -1)},
			jobs: map[types.UID]types.UID{"fj1": "f"},
			want: 1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.removed == nil {
				tc.removed = func(string, string) bool { return false }
			}
			if tc.duringRestart == nil {
				tc.duringRestart = func(time.Time) bool { return false }
			}
			faulty := passOf("faults", "f", t0.Add(30*time.Second), "MPIJob")
			got, kube := duplicates(calm, calmWatch, faulty, watchOf(tc.pods, tc.jobs), tc.tampers, tc.removed, tc.duringRestart)
			if got != tc.want || kube != tc.wantKube {
				t.Errorf("duplicates = %d and the Job controller's %d, want %d and %d", got, kube, tc.want, tc.wantKube)
			}
		})
	}
}

// A restart's span runs from the kill's second to restartSettle after the API server served
// again.
func TestDuringRestart(t *testing.T) {
	kill := t0.Add(700 * time.Millisecond)
	rep := &faultReport{restarts: []span{{from: kill, to: kill.Add(3*time.Second + restartSettle)}}}
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{-time.Second, false}, {0, true}, {2 * time.Second, true}, {13 * time.Second, true}, {14 * time.Second, false}} {
		if got := rep.duringRestart(t0.Add(tc.at)); got != tc.want {
			t.Errorf("duringRestart(t0%+v) = %v, want %v", tc.at, got, tc.want)
		}
	}
}
