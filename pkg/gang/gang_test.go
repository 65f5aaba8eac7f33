package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

func pod(cpu, mem string, gpus int64) corev1.PodTemplateSpec {
	c := corev1.Container{Name: "main", Image: "i", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
	}}
	if gpus > 0 {
		c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

// A job with heterogeneous worker sets: a 1-CPU launcher, two 2-CPU workers, one GPU worker.
func spec() *engine.Spec {
	return &engine.Spec{
		Name: "train", Namespace: "ml",
		Master: engine.Master{JobName: "train-master", Template: pod("1", "1Gi", 0)},
		WorkerSets: []engine.WorkerSet{
			{Name: "cpu", ChildName: "train-workerset-cpu", Replicas: 2, Template: pod("2", "4Gi", 0)},
			{Name: "gpu", ChildName: "train-workerset-gpu", Replicas: 1, Template: pod("4", "16Gi", 2)},
		},
		SchedulingPolicy: troupev1.SchedulingPolicy{Queue: "research", PriorityClassName: "high", ScheduleTimeoutSeconds: ptr.To[int32](120)},
	}
}

func TestMinResources(t *testing.T) {
	s := spec()
	want := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("9"),
		corev1.ResourceMemory: resource.MustParse("25Gi"),
		"nvidia.com/gpu":      resource.MustParse("2"),
	}
	if diff := cmp.Diff(want, MinResources(s)); diff != "" {
		t.Errorf("every pod (-want +got):\n%s", diff)
	}
	if MinMember(s) != 4 {
		t.Errorf("minMember = %d, want every pod: launcher and 3 workers", MinMember(s))
	}

	// minAvailable 3: the launcher and the first two workers, in set order.
	s.SchedulingPolicy.MinAvailable = ptr.To[int32](3)
	want = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5"), corev1.ResourceMemory: resource.MustParse("9Gi")}
	if diff := cmp.Diff(want, MinResources(s)); diff != "" {
		t.Errorf("minAvailable 3 (-want +got):\n%s", diff)
	}
	s.SchedulingPolicy.MinAvailable = ptr.To[int32](9)
	if MinMember(s) != 4 {
		t.Errorf("minAvailable above the pod count gives minMember %d, want 4", MinMember(s))
	}
}

// Pods of worker Jobs that completed in this attempt leave the gang: a pod made after them (a
// master's retry) must not wait for them.
func TestMinMemberLeavesOutCompletedWorkers(t *testing.T) {
	for name, tc := range map[string]struct {
		minAvailable *int32
		completed    int32
		want         int32
	}{
		"none completed":                               {nil, 0, 4},
		"two of three workers completed":               {nil, 2, 2},
		"every worker completed":                       {nil, 3, 1},
		"minAvailable below what is left":              {ptr.To[int32](2), 1, 2},
		"minAvailable above what is left":              {ptr.To[int32](3), 2, 2},
		"every pod counted as completed, at least one": {nil, 4, 1},
	} {
		t.Run(name, func(t *testing.T) {
			s := spec()
			s.SchedulingPolicy.MinAvailable = tc.minAvailable
			s.Plan.CompletedWorkers = tc.completed
			if got := MinMember(s); got != tc.want {
				t.Errorf("minMember = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPodRequests(t *testing.T) {
	p := pod("1", "1Gi", 0).Spec
	p.Containers = append(p.Containers, corev1.Container{Name: "side", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}, // the request defaults to the limit
	}})
	p.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi"), corev1.ResourceCPU: resource.MustParse("100m")},
	}}}
	p.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1750m"), corev1.ResourceMemory: resource.MustParse("3Gi")}
	if diff := cmp.Diff(want, PodRequests(&p)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestVolcanoPodGroup(t *testing.T) {
	s := spec()
	got := Volcano{SchedulerName: "volcano"}.Objects(s)
	want := []client.Object{&volcanov1beta1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: "scheduling.volcano.sh/v1beta1", Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec: volcanov1beta1.PodGroupSpec{
			MinMember: 4, Queue: "research", PriorityClassName: "high",
			MinResources: &corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("9"), corev1.ResourceMemory: resource.MustParse("25Gi"), "nvidia.com/gpu": resource.MustParse("2"),
			},
		},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PodGroup (-want +got):\n%s", diff)
	}
	tmpl := pod("1", "1Gi", 0)
	Volcano{SchedulerName: "volcano"}.DecoratePod(s, &tmpl)
	if tmpl.Spec.SchedulerName != "volcano" || tmpl.Annotations["scheduling.k8s.io/group-name"] != "train" {
		t.Errorf("pod scheduler %q, annotations %v; want volcano and group train", tmpl.Spec.SchedulerName, tmpl.Annotations)
	}
	own := pod("1", "1Gi", 0)
	own.Spec.SchedulerName = "mine"
	Volcano{SchedulerName: "volcano"}.DecoratePod(s, &own)
	if own.Spec.SchedulerName != "mine" {
		t.Errorf("the template's own scheduler was replaced")
	}
}

func TestCoschedulingPodGroup(t *testing.T) {
	s := spec()
	got := Coscheduling{SchedulerName: "sp"}.Objects(s)
	want := []client.Object{&schedv1alpha1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: "scheduling.x-k8s.io/v1alpha1", Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec: schedv1alpha1.PodGroupSpec{
			MinMember: 4, ScheduleTimeoutSeconds: ptr.To[int32](120),
			MinResources: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("9"), corev1.ResourceMemory: resource.MustParse("25Gi"), "nvidia.com/gpu": resource.MustParse("2"),
			},
		},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PodGroup (-want +got):\n%s", diff)
	}
	tmpl := pod("1", "1Gi", 0)
	Coscheduling{SchedulerName: "sp"}.DecoratePod(s, &tmpl)
	if tmpl.Spec.SchedulerName != "sp" || tmpl.Labels["scheduling.x-k8s.io/pod-group"] != "train" {
		t.Errorf("pod scheduler %q, labels %v; want sp and group train", tmpl.Spec.SchedulerName, tmpl.Labels)
	}
}

func bound(n int) []corev1.Pod {
	pods := make([]corev1.Pod, n)
	for i := range pods {
		pods[i].Spec.NodeName = "node"
	}
	return pods
}

func TestConditions(t *testing.T) {
	vpg := &volcanov1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: volcanov1beta1.PodGroupSpec{MinMember: 4}}
	cpg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 4}}
	inqueue := vpg.DeepCopy()
	inqueue.Status.Phase = volcanov1beta1.PodGroupInqueue
	running := vpg.DeepCopy()
	running.Status.Phase = volcanov1beta1.PodGroupRunning
	unschedulable := vpg.DeepCopy()
	unschedulable.Status.Phase = volcanov1beta1.PodGroupPending
	unschedulable.Status.Conditions = []volcanov1beta1.PodGroupCondition{{Type: volcanov1beta1.PodGroupUnschedulableType, Status: corev1.ConditionTrue, Message: "2/4 tasks in gang unschedulable"}}
	tests := []struct {
		name       string
		got        metav1.Condition
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{"volcano: no PodGroup yet", Volcano{}.Condition(nil, nil), metav1.ConditionFalse, "PodGroupNotCreated", "the PodGroup does not exist yet"},
		{"volcano: inqueue", Volcano{}.Condition(inqueue, bound(0)), metav1.ConditionFalse, "WaitingForResources", "PodGroup train is Inqueue: waiting for 4 pods to fit together"},
		{"volcano: unschedulable", Volcano{}.Condition(unschedulable, nil), metav1.ConditionFalse, "WaitingForResources", "PodGroup train is Pending: waiting for 4 pods to fit together: 2/4 tasks in gang unschedulable"},
		{"volcano: running", Volcano{}.Condition(running, nil), metav1.ConditionTrue, "GangScheduled", "Volcano admitted the gang: PodGroup train is Running"},
		{"coscheduling: no status, 3 of 4 bound", Coscheduling{}.Condition(cpg, bound(3)), metav1.ConditionFalse, "WaitingForResources", "PodGroup train is not yet seen by the scheduler: waiting for 4 pods to fit together"},
		{"coscheduling: no status, all bound", Coscheduling{}.Condition(cpg, bound(4)), metav1.ConditionTrue, "GangScheduled", "the gang of PodGroup train is bound: 4 of its 4 pods placed together"},
	}
	for _, tc := range tests {
		if tc.got.Type != "GangScheduled" || tc.got.Status != tc.wantStatus || tc.got.Reason != tc.wantReason || tc.got.Message != tc.wantMsg {
			t.Errorf("%s: %+v\nwant %s %s %q", tc.name, tc.got, tc.wantStatus, tc.wantReason, tc.wantMsg)
		}
	}
}

// A suspended (or paused) job has no pods: its PodGroup must not hold resources for it in the
// scheduler's queue, and asks for them again once the job resumes.
func TestSuspendedJobAsksForNothing(t *testing.T) {
	s := spec()
	s.RunPolicy.Suspend = ptr.To(true)
	vpg := Volcano{SchedulerName: "volcano"}.Objects(s)[0].(*volcanov1beta1.PodGroup)
	if vpg.Spec.MinResources != nil {
		t.Errorf("suspended: Volcano PodGroup minResources %v, want none", *vpg.Spec.MinResources)
	}
	cpg := Coscheduling{SchedulerName: "sp"}.Objects(s)[0].(*schedv1alpha1.PodGroup)
	if len(cpg.Spec.MinResources) != 0 {
		t.Errorf("suspended: coscheduling PodGroup minResources %v, want none", cpg.Spec.MinResources)
	}
	s.RunPolicy.Suspend = nil
	s.RunMode.Pause, s.Plan.Pause = true, true
	if got := MinResources(s); len(got) != 0 {
		t.Errorf("paused: minResources %v, want none", got)
	}
	s.RunMode.Pause, s.Plan.Pause = false, false
	if got := MinResources(s); got.Cpu().Cmp(resource.MustParse("9")) != 0 {
		t.Errorf("resumed: minResources cpu %v, want 9 again", got.Cpu())
	}
}
