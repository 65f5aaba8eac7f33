package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// eventsOf lists the events of namespace ns about the object named name with reason.
func eventsOf(ctx context.Context, ns, name, reason string) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(e eventsv1.Event) bool { return e.Regarding.Name != name || e.Reason != reason }), nil
}

// waitForCause waits until the job's WorkersReady condition has reason, with a message that
// contains each of wants, and status.reason says it too.
func waitForCause(t *testing.T, ns, name, reason string, wants ...string) *troupev1.ChainerJob {
	t.Helper()
	return waitForJob(t, ns, name, "WorkersReady "+reason, func(j *troupev1.ChainerJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionWorkersReady)
		if c == nil || c.Reason != reason || j.Status.Reason != reason {
			return false
		}
		for _, w := range wants {
			if !strings.Contains(c.Message, w) {
				return false
			}
		}
		return true
	})
}

// A worker no node can hold is named in the job's status (WorkersReady, status.reason, the
// REASON column), with the scheduler's words, and told in one event however many passes see
// it: scaling the set, which adds a second unschedulable pod and rewrites the status, tells it
// no second time.
func TestUnschedulableWorkersAreNamed(t *testing.T) {
	t.Parallel() // 64 CPUs fit no node, whatever the others run
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("big", ns).WorkerSet("ws0", 1).Obj()
	job.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: "10m"}
	testutil.EditWorkerSet(job, "ws0", func(ws *troupev1.ChainerWorkerSet) {
		// 64 CPUs: no node of the cluster has them.
		ws.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
	})
	create(t, job)
	waitForCause(t, ns, "big", troupev1.ReasonUnschedulable, "ws0: Unschedulable on pod (big-workerset-ws0-0)", "Insufficient cpu")
	eventually(t, "an Unschedulable event", func(ctx context.Context) (bool, error) {
		events, err := eventsOf(ctx, ns, "big", troupev1.ReasonUnschedulable)
		return len(events) > 0, err
	})
	out, err := kubectl("get", "chainerjobs", "-n", ns)
	if err != nil || !strings.Contains(out, "REASON") || !strings.Contains(out, "Unschedulable") {
		t.Errorf("kubectl get shows no REASON Unschedulable (%v):\n%s", err, out)
	}

	if out, err := kubectl("patch", "chainerjob", "big", "-n", ns, "--type=merge", "-p", `{"spec":{"workerSets":{"ws0":{"replicas":2}}}}`); err != nil {
		t.Fatalf("scale: %v\n%s", err, out)
	}
	waitForCause(t, ns, "big", troupev1.ReasonUnschedulable, "ws0: Unschedulable on 2 pods (big-workerset-ws0-0, big-workerset-ws0-1)")
	events, err := eventsOf(context.Background(), ns, "big", troupev1.ReasonUnschedulable)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Series != nil {
		t.Errorf("Unschedulable events: %+v, want one, told once", events)
	}
}

// Pods held back because the job's gang is not admitted say so, for both gang providers: three
// pods of 8 CPUs on a pool of two 4-CPU nodes never fit together.
func TestGangNotAdmittedIsNamed(t *testing.T) {
	t.Parallel()
	for _, g := range []troupev1.GangProvider{troupev1.GangCoscheduling, troupev1.GangVolcano} {
		t.Run(string(g), func(t *testing.T) {
			t.Parallel() // each scheduler with a namespace (and a pool) of its own
			ns := newNamespace(t)
			gangPool(t, ns)
			job := gangChainerJob("toobig", ns, ns, g, "10m")
			onPool(&job.Spec.Master.Template, ns, "8")
			testutil.EditWorkerSet(job, "ws0", func(ws *troupev1.ChainerWorkerSet) { onPool(&ws.Template, ns, "8") })
			job.Spec.SchedulingPolicy.MinAvailable = ptr.To[int32](3)
			create(t, job)
			got := waitForCause(t, ns, "toobig", troupev1.ReasonGangNotAdmitted, "PodGroup toobig")
			c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionWorkersReady)
			t.Logf("WorkersReady: %s", c.Message)
			if r := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionRunning); r == nil {
				t.Errorf("no Running condition")
			} else {
				t.Logf("Running: %s %s", r.Reason, r.Message)
			}
			eventually(t, "a GangNotAdmitted event", func(ctx context.Context) (bool, error) {
				events, err := eventsOf(ctx, ns, "toobig", troupev1.ReasonGangNotAdmitted)
				if len(events) > 1 {
					return false, fmt.Errorf("%d GangNotAdmitted events, want one", len(events))
				}
				return len(events) == 1, err
			})
		})
	}
}
