// Package gang holds the gang-scheduling providers of the job engine: a PodGroup the scheduler
// admits as a whole (Volcano, or the scheduler-plugins coscheduling plugin), and the wiring
// that puts every pod of a job into it. The engine knows them through engine.Gang.
//
// Why a job cannot deadlock on its own gang: the PodGroup counts every pod of the job,
// launcher included (minMember defaults to all of them), and the launcher and the workers are
// created together. The scheduler binds all of them or none; a bound launcher then waits
// inside its own pod (the MPI backend's bounded wait) for workers that are already bound too.
// Nothing waits outside the gang for something the gang holds back.
package gang

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// podsInOrder lists the job's pod templates, launcher first, then every worker pod in set
// order: the order in which minMember counts them.
func podsInOrder(s *engine.Spec) []*corev1.PodTemplateSpec {
	var pods []*corev1.PodTemplateSpec
	if s.HasMaster() {
		pods = append(pods, &s.Master.Template)
	}
	for i := range s.WorkerSets {
		ws := &s.WorkerSets[i]
		for range ws.Replicas {
			pods = append(pods, &ws.Template)
		}
	}
	return pods
}

// MinMember is how many of the job's pods must be schedulable together: the scheduling
// policy's minAvailable, else every pod (launcher included); but never more than the pods
// still to run. The pods of worker Jobs that completed in this attempt never come back, and
// a gang that still counted them could admit no pod made after them (a master's retry once
// the workers of a PyTorchJob have finished): the coscheduling plugin counts only the group's
// pods that have not ended, and would refuse that pod forever.
func MinMember(s *engine.Spec) int32 {
	all := s.MasterPods() + s.TotalWorkers()
	want := all
	if m := s.SchedulingPolicy.MinAvailable; m != nil && *m < all {
		want = *m
	}
	return max(min(want, all-s.Plan.CompletedWorkers), 1)
}

// MinResources sums the requests of the pods that make up MinMember, launcher first, unless
// schedulingPolicy.minResources gives them. A job
// that is suspended or paused has no pods and asks for nothing: Volcano's enqueue step would
// otherwise hold its minResources for it in the queue while it waits (for Kueue, say).
func MinResources(s *engine.Spec) corev1.ResourceList {
	total := corev1.ResourceList{}
	if s.Suspended() || s.Paused() {
		return total
	}
	if given := s.SchedulingPolicy.MinResources; given != nil {
		return given.DeepCopy() // the user's (schedulingPolicy.minResources)
	}
	for _, tmpl := range podsInOrder(s)[:MinMember(s)] {
		for name, q := range PodRequests(&tmpl.Spec) {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	return total
}

// PodRequests is what the scheduler reserves for a pod: the sum of its containers' requests
// (a limit stands for a missing request, as the API server defaults it), or the largest
// request of an init container when that is more, plus the pod overhead.
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range spec.Containers {
		for name, q := range requests(&c) {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	for _, c := range spec.InitContainers {
		for name, q := range requests(&c) {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				out[name] = q.DeepCopy()
			}
		}
	}
	for name, q := range spec.Overhead {
		sum := out[name]
		sum.Add(q)
		out[name] = sum
	}
	return out
}

func requests(c *corev1.Container) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range c.Resources.Limits {
		out[name] = q.DeepCopy()
	}
	for name, q := range c.Resources.Requests {
		out[name] = q.DeepCopy()
	}
	return out
}

// schedulerName sets the pod's scheduler unless the template chose one.
func schedulerName(tmpl *corev1.PodTemplateSpec, name string) {
	if tmpl.Spec.SchedulerName == "" {
		tmpl.Spec.SchedulerName = name
	}
}

// boundWhole reports the gang admitted once at least minMember of the job's pods are bound to
// nodes: the scheduler binds a gang's pods only all together.
func boundWhole(group string, minMember int32, pods []corev1.Pod) (metav1.Condition, bool) {
	var bound int32
	for i := range pods {
		if pods[i].Spec.NodeName != "" && pods[i].DeletionTimestamp.IsZero() {
			bound++
		}
	}
	if bound < minMember || minMember == 0 {
		return metav1.Condition{}, false
	}
	return gangCondition(true, troupev1.ReasonGangScheduled,
		fmt.Sprintf("the gang of PodGroup %s is bound: %d of its %d pods placed together", group, bound, minMember)), true
}

func quantityPtr(l corev1.ResourceList) *corev1.ResourceList {
	if len(l) == 0 {
		return nil
	}
	return ptr.To(l)
}
