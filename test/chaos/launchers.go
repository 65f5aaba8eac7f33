package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// launcherWatch sees every master (launcher) pod and Job of a namespace over a whole run,
// through informers: they re-list after a broken watch (an API server or etcd restart), so
// a pod created and gone while the watch was down is still counted if the re-list sees it,
// and the set of UIDs seen only grows.
type launcherWatch struct {
	mu   sync.Mutex
	pods map[types.UID]*seenPod
	jobs map[types.UID]*seenJob
}

type seenPod struct {
	pod *corev1.Pod // the last state seen
	// lastLive is when the pod was last seen neither terminal nor being deleted; seenEnded
	// when it was first seen terminal or being deleted (zero: not yet).
	lastLive, seenEnded time.Time
	gone                bool
}

type seenJob struct {
	job  *batchv1.Job
	gone bool
}

// watchLaunchers starts the informers; they stop with ctx.
func watchLaunchers(ctx context.Context, kube kubernetes.Interface, ns string) (*launcherWatch, error) {
	w := &launcherWatch{pods: map[types.UID]*seenPod{}, jobs: map[types.UID]*seenJob{}}
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = troupev1.LabelRole + "=" + troupev1.RoleMaster
		}))
	pods := f.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.pod(o, false) },
		UpdateFunc: func(_, o any) { w.pod(o, false) },
		DeleteFunc: func(o any) { w.pod(o, true) },
	}); err != nil {
		return nil, err
	}
	jobs := f.Batch().V1().Jobs().Informer()
	if _, err := jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.job(o, false) },
		UpdateFunc: func(_, o any) { w.job(o, false) },
		DeleteFunc: func(o any) { w.job(o, true) },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return w, nil
}

func (w *launcherWatch) pod(o any, deleted bool) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.pods[pod.UID]
	if s == nil {
		s = &seenPod{}
		w.pods[pod.UID] = s
	}
	s.pod = pod
	if !deleted && pod.DeletionTimestamp == nil && !terminal(pod) {
		s.lastLive = time.Now()
	} else if s.seenEnded.IsZero() && (pod.DeletionTimestamp != nil || terminal(pod)) {
		s.seenEnded = time.Now()
	}
	s.gone = s.gone || deleted
}

func (w *launcherWatch) job(o any, deleted bool) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	job, ok := o.(*batchv1.Job)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.jobs[job.UID]
	if s == nil {
		s = &seenJob{}
		w.jobs[job.UID] = s
	}
	s.job = job
	s.gone = s.gone || deleted
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// launcherCounts is what the watch saw of one troupe job.
type launcherCounts struct {
	pods, jobs int
	// overlaps: launcher Jobs with pods created while another of their pods still ran;
	// afterFinal: pods created after the job had completed.
	overlaps   []overlapGroup
	afterFinal int
}

// counts groups the launcher pods and Jobs by the troupe job they belong to (its UID label).
// completion gives a job's status.completionTime (zero if not final).
func (w *launcherWatch) counts(completion func(types.UID) time.Time) map[types.UID]*launcherCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[types.UID]*launcherCounts{}
	get := func(labels map[string]string) *launcherCounts {
		uid := types.UID(labels[troupev1.LabelJobUID])
		if out[uid] == nil {
			out[uid] = &launcherCounts{}
		}
		return out[uid]
	}
	for _, j := range w.jobs {
		get(j.job.Labels).jobs++
	}
	byJob := map[types.UID][]*seenPod{}
	for _, p := range w.pods {
		c := get(p.pod.Labels)
		c.pods++
		uid := types.UID(p.pod.Labels[troupev1.LabelJobUID])
		if done := completion(uid); !done.IsZero() && p.pod.CreationTimestamp.Time.Truncate(time.Second).After(done.Truncate(time.Second)) {
			c.afterFinal++
		}
		if owner := metav1.GetControllerOf(p.pod); owner != nil {
			byJob[owner.UID] = append(byJob[owner.UID], p)
		}
	}
	for _, ps := range byJob {
		c := get(ps[0].pod.Labels)
		if late := overlapping(ps); len(late) > 0 {
			g := overlapGroup{job: metav1.GetControllerOf(ps[0].pod).Name}
			for _, p := range late {
				g.lateCreated = append(g.lateCreated, p.pod.CreationTimestamp.Time)
			}
			for _, p := range ps {
				g.pods = append(g.pods, p.pod.Name)
				g.detail = append(g.detail, describePod(p))
			}
			c.overlaps = append(c.overlaps, g)
		}
	}
	return out
}

// overlapGroup is a launcher Job with pods created while another of its pods ran, at
// lateCreated (one per such pod).
type overlapGroup struct {
	job         string
	pods        []string
	detail      []string
	lateCreated []time.Time
}

// describePod is one line about a launcher pod, for a duplicate's report.
func describePod(s *seenPod) string {
	p := s.pod
	owner := ""
	if o := metav1.GetControllerOf(p); o != nil {
		owner = o.Kind + " " + o.Name + " " + string(o.UID)
	}
	del := ""
	if p.DeletionTimestamp != nil {
		del = " deletion requested " + podEnd(s).UTC().Format(time.TimeOnly)
	}
	return fmt.Sprintf("pod %s of %s: created %s, phase %s, ended %s%s, gone %v",
		p.Name, owner, p.CreationTimestamp.UTC().Format(time.TimeOnly), p.Status.Phase, podEnd(s).UTC().Format(time.TimeOnly), del, s.gone)
}

// overlapping returns the pods created while an earlier pod of the same list was still running.
// Times are whole seconds (creationTimestamp's precision): a pod created in the second its
// predecessor ended is not counted, so a count is never a false alarm.
func overlapping(ps []*seenPod) []*seenPod {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b *seenPod) int { return a.pod.CreationTimestamp.Compare(b.pod.CreationTimestamp.Time) })
	var late []*seenPod
	for i, b := range ps {
		created := b.pod.CreationTimestamp.Truncate(time.Second)
		for _, a := range ps[:i] {
			if a.pod.CreationTimestamp.Equal(&b.pod.CreationTimestamp) {
				// Same second: no order to tell.
				continue
			}
			if created.Before(podEnd(a).Truncate(time.Second)) {
				late = append(late, b)
				break
			}
		}
	}
	return late
}

// podEnd is the earliest moment the pod is known to have stopped running: its containers'
// finish, the deletion request, or the moment the watch first saw it ended, whichever is
// first; or (a pod seen deleted with neither) the last time it was seen running. A pod still
// running has no end.
func podEnd(s *seenPod) time.Time {
	p := s.pod
	var end time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && (end.IsZero() || t.FinishedAt.Time.Before(end)) {
			end = t.FinishedAt.Time
		}
	}
	if p.DeletionTimestamp != nil {
		requested := p.DeletionTimestamp.Time
		if g := p.DeletionGracePeriodSeconds; g != nil {
			requested = requested.Add(-time.Duration(*g) * time.Second)
		}
		if end.IsZero() || requested.Before(end) {
			end = requested
		}
	}
	if !s.seenEnded.IsZero() && !end.IsZero() && s.seenEnded.Before(end) {
		// A pod cannot be seen ended before it ended: a later finishedAt was written again
		// after the fact (the simulated node re-applying its stage after an API server
		// restart), and the moment the watch saw the pod ended bounds its end.
		end = s.seenEnded
	}
	if end.IsZero() && (s.gone || terminal(p)) {
		// Ended unseen (during a broken watch): the last time it was seen running, or its
		// creation, are lower bounds of its end, so an overlap counted with them is real.
		end = p.CreationTimestamp.Time
		if s.lastLive.After(end) {
			end = s.lastLive
		}
	}
	if end.IsZero() {
		return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return end
}
