package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
	"github.com/troupe-dev/troupe/webhooks"
)

// update applies mutate to the stored job and returns the API server's answer.
func update[T client.Object](t *testing.T, job T, mutate func(T)) error {
	t.Helper()
	fresh := job.DeepCopyObject().(T)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), fresh); err != nil {
		t.Fatal(err)
	}
	mutate(fresh)
	return k8s.Update(context.Background(), fresh)
}

func TestChainerJobUpdates(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("up", ns).WorkerSet("ws0", 2).Obj()
	create(t, job)

	refused := []struct {
		name, expect string
		mutate       func(*troupev1.ChainerJob)
	}{
		{"worker image", "spec.workerSets[ws0].template", func(j *troupev1.ChainerJob) {
			j.Spec.WorkerSets["ws0"].Template.Spec.Containers[0].Image = "other:2"
		}},
		{"master node selector while running", "spec.master.template.spec.nodeSelector: Forbidden", func(j *troupev1.ChainerJob) {
			j.Spec.Master.Template.Spec.NodeSelector = map[string]string{"pool": "a"}
		}},
		{"a worker set added", "spec.workerSets: Forbidden", func(j *troupev1.ChainerJob) {
			j.Spec.WorkerSets["ws1"] = troupev1.ChainerWorkerSet{Replicas: ptr.To[int32](1), Template: testutil.ChainerTemplate("c:1")}
		}},
		{"the transport", "spec.transport", func(j *troupev1.ChainerJob) { j.Spec.Transport = troupev1.MPITransportSSH }},
		{"the backend", "spec.backend", func(j *troupev1.ChainerJob) { j.Spec.Backend = troupev1.ChainerBackendNone; j.Spec.WorkerSets = nil }},
		{"the gang provider", "spec.schedulingPolicy.gang", func(j *troupev1.ChainerJob) { j.Spec.SchedulingPolicy.Gang = ptr.To(troupev1.GangVolcano) }},
		{"a worker set renamed", "spec.workerSets: Forbidden", func(j *troupev1.ChainerJob) {
			j.Spec.WorkerSets["renamed"] = j.Spec.WorkerSets["ws0"]
			delete(j.Spec.WorkerSets, "ws0")
		}},
	}
	for _, c := range refused {
		t.Run("refused: "+c.name, func(t *testing.T) {
			err := update(t, job, c.mutate)
			if err == nil || !strings.Contains(err.Error(), c.expect) {
				t.Errorf("update of %s: %v, want a refusal naming %q", c.name, err, c.expect)
			}
		})
	}

	allowed := []struct {
		name   string
		mutate func(*troupev1.ChainerJob)
	}{
		{"worker replicas", func(j *troupev1.ChainerJob) {
			testutil.EditWorkerSet(j, "ws0", func(ws *troupev1.ChainerWorkerSet) { ws.Replicas = ptr.To[int32](3) })
		}},
		{"the TTL", func(j *troupev1.ChainerJob) { j.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](60) }},
		{"suspend", func(j *troupev1.ChainerJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) }},
		{"scheduling fields while suspended", func(j *troupev1.ChainerJob) {
			testutil.EditWorkerSet(j, "ws0", func(ws *troupev1.ChainerWorkerSet) {
				ws.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
				ws.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
			})
			j.Spec.Master.Template.Labels = map[string]string{"queue": "a"}
		}},
	}
	for _, c := range allowed {
		t.Run("allowed: "+c.name, func(t *testing.T) {
			if err := update(t, job, c.mutate); err != nil {
				t.Errorf("update of %s refused: %v", c.name, err)
			}
		})
	}
	t.Run("refused: an image while suspended", func(t *testing.T) {
		err := update(t, job, func(j *troupev1.ChainerJob) { j.Spec.Master.Template.Spec.Containers[0].Image = "x:9" })
		if err == nil || !strings.Contains(err.Error(), "only the labels, annotations, nodeSelector") {
			t.Errorf("image change of a suspended job: %v, want it refused", err)
		}
	})
	// Kueue admits a workload in one update: the placement and the resume together.
	t.Run("allowed: scheduling fields and resume in one update", func(t *testing.T) {
		if err := update(t, job, func(j *troupev1.ChainerJob) {
			j.Spec.Master.Template.Spec.NodeSelector = map[string]string{"pool": "b"}
			testutil.EditWorkerSet(j, "ws0", func(ws *troupev1.ChainerWorkerSet) { ws.Template.Spec.NodeSelector = map[string]string{"pool": "b"} })
			j.Spec.RunPolicy.Suspend = ptr.To(false)
		}); err != nil {
			t.Errorf("place and resume in one update refused: %v", err)
		}
	})
}

func TestMPIJobUpdates(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.Load[*troupev1.MPIJob](t, "../../examples/mpijob.yaml", ns)
	create(t, job)
	for name, c := range map[string]struct {
		expect string
		mutate func(*troupev1.MPIJob)
	}{
		"the program":        {"spec.worker.cmd", func(j *troupev1.MPIJob) { j.Spec.Worker.Cmd = []string{"./other"} }},
		"the MPI":            {"spec.mpiImplementation", func(j *troupev1.MPIJob) { j.Spec.MPIImplementation = "MPICH"; j.Spec.MCA = nil }},
		"the MCA parameters": {"spec.mca", func(j *troupev1.MPIJob) { j.Spec.MCA["btl"] = "self,tcp" }},
		"the worker image":   {"spec.worker.template", func(j *troupev1.MPIJob) { j.Spec.Worker.Template.Spec.Containers[0].Image = "x:1" }},
		"a failure policy added": {"runPolicy.failurePolicy", func(j *troupev1.MPIJob) {
			j.Spec.RunPolicy.FailurePolicy = &troupev1.FailurePolicy{MaxRestarts: 2}
		}},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			err := update(t, job, c.mutate)
			if err == nil || !strings.Contains(err.Error(), c.expect) {
				t.Errorf("update of %s: %v, want a refusal naming %q", name, err, c.expect)
			}
		})
	}
	if err := update(t, job, func(j *troupev1.MPIJob) { j.Spec.Worker.Replicas = ptr.To[int32](7) }); err != nil {
		t.Errorf("scaling the workers refused: %v", err)
	}
}

// A job over webhooks.MaxJobBytes is refused at admission, saying its size and the bound; one
// of a large but ordinary size is not.
func TestOversizedJobIsRefused(t *testing.T) {
	ns := newNamespace(t)
	withEnv := func(name string, bytes int) *troupev1.ChainerJob {
		job := testutil.MakeChainerJob(name, ns).Obj()
		c := &job.Spec.Master.Template.Spec.Containers[0]
		for i := 0; bytes > 0; i++ {
			n := min(bytes, 32<<10)
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("BLOB_%d", i), Value: strings.Repeat("x", n)})
			bytes -= n
		}
		return job
	}
	if err := k8s.Create(context.Background(), withEnv("ordinary", 128<<10)); err != nil {
		t.Errorf("a job of 128 KiB: %v", err)
	}
	err := k8s.Create(context.Background(), withEnv("huge", 600<<10))
	if err == nil || !strings.Contains(err.Error(), "spec: Too long") || !strings.Contains(err.Error(), fmt.Sprint(webhooks.MaxJobBytes)) {
		t.Errorf("a job of 600 KiB: %v, want refused as too long, naming %d bytes", err, webhooks.MaxJobBytes)
	}
}
