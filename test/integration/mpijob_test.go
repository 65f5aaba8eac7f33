package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

const exampleMPIJob = "../../examples/mpijob.yaml"

func loadMPIJob(t *testing.T, path, ns string) *troupev1.MPIJob {
	t.Helper()
	return testutil.Load[*troupev1.MPIJob](t, path, ns)
}

// The T9k example, as written, gets a launcher Job with the generated mpirun line, a worker
// StatefulSet running sshd, the hostfile of its five workers and its own SSH keys.
func TestMPIJobT9kExampleChildren(t *testing.T) {
	ns := newNamespace(t)
	job := loadMPIJob(t, exampleMPIJob, ns)
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("the T9k example is refused: %v", err)
	}
	jobLabels := map[string]string{controllers.MPIJobNameLabel: "mpi-example", troupev1.LabelJobUID: string(job.UID)}

	launcher := waitFor(t, &batchv1.Job{}, ns, "mpi-example-launcher")
	checkOwnedAndLabelled(t, launcher, job, with(jobLabels, troupev1.LabelRole, "master"))
	var launch *corev1.Container
	for i := range launcher.Spec.Template.Spec.Containers {
		if c := &launcher.Spec.Template.Spec.Containers[i]; c.Name == troupev1.MPILauncherContainer {
			launch = c
		}
	}
	if launch == nil {
		t.Fatalf("launcher containers = %+v, want mpi-launcher", launcher.Spec.Template.Spec.Containers)
	}
	wantCmd := "mpirun --prefix /usr/local --mca btl ^openib -N 3 --enable-recovery --max-restarts 100 --allow-run-as-root -bind-to none ./random_walk 20 40 2"
	if got := strings.Join(launch.Command, " "); got != wantCmd || launch.Image != "t9kpublic/mpi-tutorial:2021022-2" {
		t.Errorf("launcher runs %q from %s, want %q from the worker image", got, launch.Image, wantCmd)
	}
	if init := launcher.Spec.Template.Spec.InitContainers; len(init) != 1 || !contains(init[0].Args, "--transport=SSH") {
		t.Errorf("launcher init containers = %+v, want the wait over SSH", init)
	}

	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker")
	checkOwnedAndLabelled(t, sts, job, with(jobLabels, troupev1.LabelRole, "worker", troupev1.LabelWorkerSet, "worker"))
	worker := sts.Spec.Template.Spec.Containers[0]
	if *sts.Spec.Replicas != 5 || worker.Name != "mpi-worker" || strings.Join(worker.Command, " ") != "/usr/sbin/sshd -D -e -f /etc/troupe/mpi/sshd_config" {
		t.Errorf("workers: %d replicas, %s runs %v; want 5 running sshd", *sts.Spec.Replicas, worker.Name, worker.Command)
	}

	cm := waitFor(t, &corev1.ConfigMap{}, ns, "mpi-example-mpi")
	var want strings.Builder
	for i := range 5 {
		fmt.Fprintf(&want, "mpi-example-worker-%d.mpi-example.%s.svc slots=1\n", i, ns)
	}
	if diff := cmp.Diff(want.String(), cm.Data[mpi.HostfileKey]); diff != "" {
		t.Errorf("hostfile: the launcher is not a host, the five workers are (-want +got):\n%s", diff)
	}
	waitFor(t, &corev1.Secret{}, ns, "mpi-example-ssh")
	waitFor(t, &corev1.Service{}, ns, "mpi-example")
}

// kubectl scale works through the scale subresource: the StatefulSet and the hostfile follow,
// and the status reports the workers and their selector.
func TestMPIJobScale(t *testing.T) {
	ns := newNamespace(t)
	job := loadMPIJob(t, exampleMPIJob, ns)
	job.Spec.Worker.Replicas = ptr.To[int32](2)
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker")
	setStatus(t, sts, func() { sts.Status.Replicas = 2; sts.Status.ReadyReplicas = 2 })
	got := waitForMPIJob(t, ns, "mpi-example", "worker scale status", func(j *troupev1.MPIJob) bool {
		return j.Status.WorkerReplicas == 2 && j.Status.WorkerSelector != ""
	})
	wantSel := fmt.Sprintf("troupe.dev/job-uid=%s,troupe.dev/role=worker", job.UID)
	if got.Status.WorkerSelector != wantSel {
		t.Errorf("workerSelector = %q, want %q", got.Status.WorkerSelector, wantSel)
	}
	if out := kubectl(t, "get", "--subresource=scale", "-n", ns, "mpijob/mpi-example", "-o", "jsonpath={.spec.replicas} {.status.replicas} {.status.selector}"); out != "2 2 "+wantSel {
		t.Errorf("scale subresource reads %q, want %q", out, "2 2 "+wantSel)
	}

	kubectl(t, "scale", "-n", ns, "mpijob/mpi-example", "--replicas=3")
	eventually(t, "StatefulSet and hostfile at 3 workers", func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example-mpi"}, &cm); err != nil {
			return false, err
		}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example-worker"}, sts); err != nil {
			return false, err
		}
		return *sts.Spec.Replicas == 3 && strings.Count(cm.Data[mpi.HostfileKey], "\n") == 3, nil
	})
}

// A ChainerJob and an MPIJob may share a name: each selects its own children by owner, and
// the names they would share (the Service, the ConfigMap) are reported as a conflict on the
// second job rather than taken over.
func TestChainerJobAndMPIJobShareAName(t *testing.T) {
	ns := newNamespace(t)
	chainer := create(t, testutil.MakeChainerJob("same", ns).WorkerSet("ws0", 1).Obj())
	waitFor(t, &corev1.Service{}, ns, "same")
	svcBefore := waitFor(t, &corev1.Service{}, ns, "same")

	job := loadMPIJob(t, exampleMPIJob, ns)
	job.Name = "same"
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	got := waitForMPIJob(t, ns, "same", "conflict reported", func(j *troupev1.MPIJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason == troupev1.ReasonChildConflict
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized)
	if !strings.Contains(c.Message, "Service same") || !strings.Contains(c.Message, "ConfigMap same-mpi") {
		t.Errorf("conflict message %q does not name the shared Service and ConfigMap", c.Message)
	}
	svc := waitFor(t, &corev1.Service{}, ns, "same")
	if svc.ResourceVersion != svcBefore.ResourceVersion || svc.OwnerReferences[0].UID != chainer.UID {
		t.Errorf("the MPIJob touched the ChainerJob's Service")
	}
	var jobs batchv1.JobList
	if err := k8s.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.Name == "same-launcher" {
			t.Errorf("the MPIJob created a launcher while its names conflict")
		}
	}
}

func waitForMPIJob(t *testing.T, ns, name, what string, pred func(*troupev1.MPIJob) bool) *troupev1.MPIJob {
	t.Helper()
	return waitUntil(t, &troupev1.MPIJob{}, ns, name, what, pred)
}
