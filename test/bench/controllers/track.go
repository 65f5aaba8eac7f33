package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// tracker watches one side's namespace and notes when the bench first saw each pod Running,
// each launcher pod finished and each job final. Every time is when the bench's watch saw it,
// so all sides are timed by the same clock and the same watch delay.
type tracker struct {
	mu           sync.Mutex
	workers      int
	final        func(*unstructured.Unstructured) bool
	podRunning   map[string]bool // pod UID
	jobPods      map[string]int  // job -> pods seen Running
	jobRunning   map[string]time.Time
	launcherDone map[string]time.Time
	launcherPods map[string]string // launcher pod name -> job, while it runs
	jobFinal     map[string]time.Time
	// launcherJobDone: when each job's launcher Job (batch/v1, <job>-launcher on every side)
	// was seen Complete or Failed, kube-controller-manager's Job controller's verdict.
	launcherJobDone map[string]time.Time
	running         int
	releasedAfter   int // launchers that ended before the bench released them
	released        bool
}

func newTracker(ctx context.Context, dyn dynamic.Interface, ns string, jobs schema.GroupVersionResource,
	final func(*unstructured.Unstructured) bool, workers int) (*tracker, error) {
	t := &tracker{
		workers: workers, final: final,
		podRunning: map[string]bool{}, jobPods: map[string]int{}, jobRunning: map[string]time.Time{},
		launcherDone: map[string]time.Time{}, launcherPods: map[string]string{}, jobFinal: map[string]time.Time{},
		launcherJobDone: map[string]time.Time{},
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
	pods := f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Informer()
	js := f.ForResource(jobs).Informer()
	launcherJobs := f.ForResource(batchJobs).Informer() // js itself on the limit's side
	handler := func(fn func(*unstructured.Unstructured)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { fn(o.(*unstructured.Unstructured)) },
			UpdateFunc: func(_, o any) { fn(o.(*unstructured.Unstructured)) },
		}
	}
	if _, err := pods.AddEventHandler(handler(t.pod)); err != nil {
		return nil, err
	}
	if _, err := js.AddEventHandler(handler(t.job)); err != nil {
		return nil, err
	}
	if _, err := launcherJobs.AddEventHandler(handler(t.launcherJob)); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("watch of %s did not sync", typ)
		}
	}
	return t, nil
}

func (t *tracker) pod(u *unstructured.Unstructured) {
	now := time.Now()
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	job, role := u.GetLabels()[jobLabel], u.GetLabels()[roleLabel]
	if job == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	uid := string(u.GetUID())
	if (phase == "Running" || phase == "Succeeded" || phase == "Failed") && !t.podRunning[uid] {
		t.podRunning[uid] = true
		t.running++
		t.jobPods[job]++
		if t.jobPods[job] == 1+t.workers {
			t.jobRunning[job] = now
		}
	}
	if role != "launcher" {
		return
	}
	switch phase {
	case "Running":
		t.launcherPods[u.GetName()] = job
	case "Succeeded", "Failed":
		delete(t.launcherPods, u.GetName())
		if _, seen := t.launcherDone[job]; !seen {
			t.launcherDone[job] = now
			if !t.released {
				t.releasedAfter++
			}
		}
	}
}

func (t *tracker) job(u *unstructured.Unstructured) {
	now := time.Now()
	job := u.GetLabels()[jobLabel]
	if job == "" || !t.final(u) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.jobFinal[job]; !seen {
		t.jobFinal[job] = now
	}
}

// launcherJob notes when a launcher Job (every side names it <job>-launcher) got its verdict.
func (t *tracker) launcherJob(u *unstructured.Unstructured) {
	now := time.Now()
	job, ok := strings.CutSuffix(u.GetName(), "-launcher")
	if !ok || !jobControllerDone(u) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.launcherJobDone[job]; !seen {
		t.launcherJobDone[job] = now
	}
}

var jobControllerDone = conditionTrue("Complete", "Failed")

// launcherJobsDone is how many launcher Jobs were seen Complete or Failed.
func (t *tracker) launcherJobsDone() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.launcherJobDone)
}

// counts are the pods seen Running and the jobs seen final so far.
func (t *tracker) counts() (running, final int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running, len(t.jobFinal)
}

// release marks the launchers released and returns the running launcher pods.
func (t *tracker) release() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.released = true
	names := make([]string, 0, len(t.launcherPods))
	for n := range t.launcherPods {
		names = append(names, n)
	}
	return names
}
