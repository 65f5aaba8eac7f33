package e2e

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// How a test chooses what a simulated master does (the kwok stages of hack/controlplane).
const (
	simOutcomeLabel    = "troupe.dev/sim-outcome"
	simDurationAnnot   = "troupe.dev/sim-duration"
	simOutcomeFail     = "fail"
	longRunningMaster  = "60s"
	exampleMN          = "../../examples/chainerjob-mn.yaml"
	exampleName        = "example-job-mn"
	exampleWorkerSet   = "example-job-mn-workerset-ws0"
	exampleMasterJob   = "example-job-mn-master"
	exampleLabelSelect = controllers.ChainerJobNameLabel + "=" + exampleName
)

// The seed example runs to Succeeded with the real Job and StatefulSet controllers, and the
// workers are released afterwards.
func TestExampleSucceeds(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	w, err := testutil.LoadChainerJob(exampleMN, ns)
	if err != nil {
		t.Fatal(err)
	}
	create(t, w.Obj())
	sawRunning := false
	job := waitForJob(t, ns, exampleName, "Succeeded", func(j *troupev1.ChainerJob) bool {
		sawRunning = sawRunning || j.Status.Phase == troupev1.JobRunning
		return j.Status.Phase == troupev1.JobSucceeded
	})
	if !meta.IsStatusConditionTrue(job.Status.Conditions, troupev1.ConditionSucceeded) || job.Status.CompletionTime == nil {
		t.Errorf("succeeded job lacks its condition or completion time: %+v", job.Status)
	}
	// What the chainer-operator README shows of `kubectl get chainerjobs $JOB_NAME -o yaml`.
	out, err := kubectl("get", "-n", ns, "chainerjob", exampleName, "-o", "yaml")
	if err != nil {
		t.Fatalf("kubectl get -o yaml: %v: %s", err, out)
	}
	for _, want := range []string{"startTime:", "completionTime:", "succeeded: 1", "type: Complete"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get chainerjob %s -o yaml lacks the seed's status field %q:\n%s", exampleName, want, out)
		}
	}
	if _, status, ok := strings.Cut(out, "\nstatus:"); ok {
		t.Logf("kubectl get chainerjob %s -o yaml, its status:%s", exampleName, status)
	}
	if out, err := kubectl("wait", "-n", ns, "--for=condition=Complete", "--timeout=10s", "chainerjob/"+exampleName); err != nil {
		t.Errorf("kubectl wait --for=condition=Complete: %v: %s", err, out)
	}
	eventually(t, "worker pods gone after the master succeeded", func(ctx context.Context) (bool, error) {
		sts := &appsv1.StatefulSet{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: exampleWorkerSet}, sts); err != nil {
			return false, err
		}
		pods, err := podsOf(ctx, ns, troupev1.RoleWorker)
		return *sts.Spec.Replicas == 0 && sts.Status.Replicas == 0 && len(pods) == 0, err
	})
}

// A master that keeps failing fails the job once backoffLimit retries are spent.
func TestFailingMasterFails(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("fails", ns).WorkerSet("ws0", 1).BackoffLimit(1).Obj()
	job.Spec.Master.Template.Labels = map[string]string{simOutcomeLabel: simOutcomeFail}
	create(t, job)
	got := waitForJob(t, ns, "fails", "Failed", func(j *troupev1.ChainerJob) bool {
		return j.Status.Phase == troupev1.JobFailed
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionFailed)
	if c == nil || c.Reason != "BackoffLimitExceeded" {
		t.Errorf("Failed condition = %+v, want reason BackoffLimitExceeded", c)
	}
	master := &batchv1.Job{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "fails-master"}, master); err != nil {
		t.Fatal(err)
	}
	if master.Status.Failed != 2 {
		t.Errorf("master pods failed = %d, want 2 (the first run and backoffLimit=1 retry)", master.Status.Failed)
	}
	if rs := got.Status.ReplicaStatuses; len(rs) == 0 || rs[0].Failed != 2 {
		t.Errorf("status.replicaStatuses[master].failed = %+v, want 2", rs)
	}
}

// `kubectl get all -l chainerjob.troupe.dev/name=...` shows the pods, the StatefulSet, the Job
// and the Service; deleting a StatefulSet brings it back; deleting the job removes every child
// through owner references and the real garbage collector.
func TestChildrenLifecycle(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	w, err := testutil.LoadChainerJob(exampleMN, ns)
	if err != nil {
		t.Fatal(err)
	}
	job := w.Obj()
	job.Spec.Master.Template.Annotations = map[string]string{simDurationAnnot: longRunningMaster}
	create(t, job)
	waitForJob(t, ns, exampleName, "Running with its workers ready", func(j *troupev1.ChainerJob) bool {
		return j.Status.Phase == troupev1.JobRunning && meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionWorkersReady)
	})

	all, err := kubectl("get", "all", "-n", ns, "-l", exampleLabelSelect)
	if err != nil {
		t.Fatalf("kubectl get all: %v\n%s", err, all)
	}
	for _, want := range []string{
		"pod/" + exampleMasterJob + "-", "pod/" + exampleWorkerSet + "-0", "pod/" + exampleWorkerSet + "-1",
		"service/" + exampleName, "statefulset.apps/" + exampleWorkerSet, "job.batch/" + exampleMasterJob,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("kubectl get all -l %s lacks %s:\n%s", exampleLabelSelect, want, all)
		}
	}

	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: exampleWorkerSet}, sts); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted StatefulSet back with ready workers", func(ctx context.Context) (bool, error) {
		again := &appsv1.StatefulSet{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), again)
		return err == nil && again.UID != sts.UID && again.Status.ReadyReplicas == 2, client.IgnoreNotFound(err)
	})

	if err := k8s.Delete(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every child garbage-collected", func(ctx context.Context) (bool, error) {
		for _, obj := range []client.Object{
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: exampleMasterJob}},
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: exampleWorkerSet}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: exampleName}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: exampleName + "-mpi"}},
		} {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: obj.GetName()}, obj)
			if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		pods, err := podsOf(ctx, ns, "")
		return len(pods) == 0, err
	})
}

func create(t *testing.T, job *troupev1.ChainerJob) {
	t.Helper()
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("create ChainerJob: %v", err)
	}
}

func waitForJob(t *testing.T, ns, name, what string, pred func(*troupev1.ChainerJob) bool) *troupev1.ChainerJob {
	t.Helper()
	job := &troupev1.ChainerJob{}
	eventually(t, "ChainerJob "+name+" "+what, func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)
		return err == nil && pred(job), err
	})
	return job
}

// podsOf lists the namespace's troupe pods of a role ("" for every role).
func podsOf(ctx context.Context, ns, role string) ([]corev1.Pod, error) {
	sel := client.HasLabels{troupev1.LabelJobUID}
	var list corev1.PodList
	if err := k8s.List(ctx, &list, client.InNamespace(ns), sel); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if role == "" || p.Labels[troupev1.LabelRole] == role {
			out = append(out, p)
		}
	}
	return out, nil
}
