package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// gangPool creates two simulated 4-CPU nodes of the test's own (nodePool): room for one job of
// 3 pods x 2 CPU, not for two.
func gangPool(t *testing.T, pool string) { nodePool(t, pool, 2, "4") }

// nodePool creates n simulated nodes of cpu CPUs of the test's own, tainted and labelled so that
// only the test's pods go there and its pods go nowhere else. They are deleted at the end.
func nodePool(t *testing.T, pool string, n int, cpu string) {
	t.Helper()
	for i := range n {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("%s-%d", pool, i),
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels:      map[string]string{"type": "kwok", gangPoolLabel: pool},
			},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: gangPoolLabel, Value: pool, Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
			},
		}
		if err := k8s.Create(context.Background(), node); err != nil {
			t.Fatalf("node %s: %v", node.Name, err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
		eventually(t, "node "+node.Name+" Ready", func(ctx context.Context) (bool, error) {
			n := &corev1.Node{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(node), n); err != nil {
				return false, err
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return n.Status.Allocatable.Cpu().Equal(resource.MustParse(cpu)), nil
				}
			}
			return false, nil
		})
	}
}

// gangPoolLabel marks the nodes of a test's pool (label and taint).
const gangPoolLabel = "troupe.dev/test-pool"

// onPool confines a pod template to the pool's nodes and makes it request cpu.
func onPool(tmpl *corev1.PodTemplateSpec, pool, cpu string) {
	tmpl.Spec.NodeSelector = map[string]string{gangPoolLabel: pool}
	tmpl.Spec.Tolerations = []corev1.Toleration{{Key: gangPoolLabel, Operator: corev1.TolerationOpEqual, Value: pool, Effect: corev1.TaintEffectNoSchedule}}
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
}

// gangChainerJob is a ChainerJob of 3 pods x 2 CPU (master + 2 workers) whose master runs for
// duration, in gang provider g.
func gangChainerJob(name, ns, pool string, g troupev1.GangProvider, duration string) *troupev1.ChainerJob {
	job := testutil.MakeChainerJob(name, ns).WorkerSet("ws0", 2).Obj()
	job.Spec.SchedulingPolicy.Gang = ptr.To(g)
	onPool(&job.Spec.Master.Template, pool, "2")
	testutil.EditWorkerSet(job, "ws0", func(ws *troupev1.ChainerWorkerSet) { onPool(&ws.Template, pool, "2") })
	job.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: duration}
	return job
}

// boundPods counts the job's pods bound to a node, by the kind's name label.
func boundPods(ctx context.Context, ns, nameLabel, job string) (int, error) {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{nameLabel: job}); err != nil {
		return 0, err
	}
	bound := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			bound++
		}
	}
	return bound, nil
}

// watchGang waits until one of two jobs of 3 pods has all of them bound and returns it first;
// the other must then have none bound. (A gang's pods are bound one API call after another,
// so the winner is seen partly bound for a moment; the loser never gets a pod.)
func watchGang(t *testing.T, ns, nameLabel string, jobs [2]string) (first, second string) {
	t.Helper()
	eventually(t, "one gang bound whole", func(ctx context.Context) (bool, error) {
		var bound [2]int
		for i, j := range jobs {
			b, err := boundPods(ctx, ns, nameLabel, j)
			if err != nil {
				return false, err
			}
			bound[i] = b
		}
		if bound[0] > 0 && bound[1] > 0 {
			t.Fatalf("both jobs have pods bound (%d and %d) on nodes with room for one", bound[0], bound[1])
		}
		switch {
		case bound[0] == 3:
			first, second = jobs[0], jobs[1]
		case bound[1] == 3:
			first, second = jobs[1], jobs[0]
		}
		return first != "", nil
	})
	return first, second
}

// noneBound fails the test if job has any pod bound.
func noneBound(t *testing.T, ns, nameLabel, job, while string) {
	t.Helper()
	if b, err := boundPods(context.Background(), ns, nameLabel, job); err == nil && b > 0 {
		t.Fatalf("%s has %d of its 3 pods bound while %s", job, b, while)
	}
}

func testGangChainerJobs(t *testing.T, g troupev1.GangProvider, secondRuns bool) {
	ns := newNamespace(t)
	gangPool(t, ns)
	jobs := [2]string{"gang-a", "gang-b"}
	for _, name := range jobs {
		create(t, gangChainerJob(name, ns, ns, g, "8s"))
	}
	first, second := watchGang(t, ns, "chainerjob.troupe.dev/name", jobs)
	// While the first runs, the second keeps every pod unbound.
	waitForJob(t, ns, first, "Succeeded", func(j *troupev1.ChainerJob) bool {
		if j.Status.Phase == troupev1.JobSucceeded {
			return true
		}
		noneBound(t, ns, "chainerjob.troupe.dev/name", second, first+" runs")
		return false
	})
	if !secondRuns {
		return
	}
	// The second gang may have pods waiting in Coscheduling's Permit when the first ends: they
	// are rejected only after permitWaitingTimeSeconds (60 s, hack/controlplane/coscheduler.yaml)
	// and the group is tried again after a backoff, so its start may take that much longer.
	job := &troupev1.ChainerJob{}
	testutil.Eventually(t, "ChainerJob "+second+" Succeeded after the first released its nodes", pollInterval,
		waitTimeout+permitWaitingTime, func(ctx context.Context) (bool, error) {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: second}, job)
			return err == nil && job.Status.Phase == troupev1.JobSucceeded, err
		})
}

// permitWaitingTime is Coscheduling's permitWaitingTimeSeconds on the local cluster.
const permitWaitingTime = 60 * time.Second

// Two ChainerJobs that cannot both fit: with the real Volcano scheduler one is bound whole and
// the other not at all, then the other runs when the first finished.
func TestGangVolcanoChainerJobs(t *testing.T) {
	t.Parallel()
	testGangChainerJobs(t, troupev1.GangVolcano, true)
}

// The same with the real scheduler-plugins coscheduling scheduler.
func TestGangCoschedulingChainerJobs(t *testing.T) {
	t.Parallel()
	testGangChainerJobs(t, troupev1.GangCoscheduling, true)
}

// Without a gang the same two jobs end up partly placed: the problem gang admission solves.
func TestNoGangSplitsJobs(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	gangPool(t, ns)
	for _, name := range []string{"split-a", "split-b"} {
		create(t, gangChainerJob(name, ns, ns, troupev1.GangNone, "30s"))
	}
	eventually(t, "a job partly placed", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"split-a", "split-b"} {
			b, err := boundPods(ctx, ns, "chainerjob.troupe.dev/name", name)
			if err != nil {
				return false, err
			}
			if b > 0 && b < 3 {
				t.Logf("%s: %d of 3 pods bound, the rest pending: without a gang the jobs split the nodes", name, b)
				return true, nil
			}
		}
		return false, nil
	})
}

// Two MPIJobs of a launcher and 2 workers x 3 CPU on the same two nodes, with each scheduler.
func TestGangMPIJobs(t *testing.T) {
	t.Parallel()
	for _, g := range []troupev1.GangProvider{troupev1.GangVolcano, troupev1.GangCoscheduling} {
		t.Run(string(g), func(t *testing.T) {
			t.Parallel() // each scheduler with a namespace (and a pool) of its own
			ns := newNamespace(t)
			gangPool(t, ns)
			jobs := [2]string{"mpi-a", "mpi-b"}
			for _, name := range jobs {
				job := loadMPIJob(t, ns)
				job.Name = name
				job.Spec.Worker.Replicas = ptr.To[int32](2)
				job.Spec.SchedulingPolicy.Gang = ptr.To(g)
				onPool(&job.Spec.Worker.Template, ns, "3")
				job.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: "8s"}
				if err := k8s.Create(context.Background(), job); err != nil {
					t.Fatal(err)
				}
			}
			first, second := watchGang(t, ns, "mpijob.troupe.dev/name", jobs)
			noneBound(t, ns, "mpijob.troupe.dev/name", second, first+" is bound whole")
			for _, name := range []string{first, second} {
				eventually(t, fmt.Sprintf("MPIJob %s Succeeded", name), func(ctx context.Context) (bool, error) {
					j := &troupev1.MPIJob{}
					err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, j)
					return err == nil && j.Status.Phase == troupev1.JobSucceeded, err
				})
			}
		})
	}
}
