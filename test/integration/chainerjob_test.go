package integration

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	"github.com/troupe-dev/troupe/pkg/backend/mpi"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

const exampleMN = "../../examples/chainerjob-mn.yaml"

// The seed ChainerMN example gets every child with the shape and labels DESIGN.md names.
func TestChainerMNExampleChildren(t *testing.T) {
	ns := newNamespace(t)
	w, err := testutil.LoadChainerJob(exampleMN, ns)
	if err != nil {
		t.Fatal(err)
	}
	job := create(t, w.Obj())
	uid := string(job.UID)
	jobLabels := map[string]string{controllers.ChainerJobNameLabel: "example-job-mn", troupev1.LabelJobUID: uid}

	svc := waitFor(t, &corev1.Service{}, ns, "example-job-mn")
	checkOwnedAndLabelled(t, svc, job, jobLabels)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("service is not headless with not-ready addresses: %+v", svc.Spec)
	}
	if diff := cmp.Diff(map[string]string{troupev1.LabelJobUID: uid}, svc.Spec.Selector); diff != "" {
		t.Errorf("service selector (-want +got):\n%s", diff)
	}

	cm := waitFor(t, &corev1.ConfigMap{}, ns, "example-job-mn-mpi")
	checkOwnedAndLabelled(t, cm, job, jobLabels)
	wantHostfile := fmt.Sprintf("example-job-mn-master.example-job-mn.%[1]s.svc slots=1\n"+
		"example-job-mn-workerset-ws0-0.example-job-mn.%[1]s.svc slots=1\n"+
		"example-job-mn-workerset-ws0-1.example-job-mn.%[1]s.svc slots=1\n", ns)
	if diff := cmp.Diff(wantHostfile, cm.Data[mpi.HostfileKey]); diff != "" {
		t.Errorf("hostfile (-want +got):\n%s", diff)
	}

	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "example-job-mn-workerset-ws0")
	workerLabels := with(jobLabels, troupev1.LabelRole, "worker", troupev1.LabelWorkerSet, "ws0")
	checkOwnedAndLabelled(t, sts, job, workerLabels)
	checkPodTemplate(t, "worker", &sts.Spec.Template, workerLabels)
	if *sts.Spec.Replicas != 2 || sts.Spec.ServiceName != "example-job-mn" || sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("worker StatefulSet: replicas %d, service %q, policy %q; want 2, example-job-mn, Parallel",
			*sts.Spec.Replicas, sts.Spec.ServiceName, sts.Spec.PodManagementPolicy)
	}

	master := waitFor(t, &batchv1.Job{}, ns, "example-job-mn-master")
	masterLabels := with(jobLabels, troupev1.LabelRole, "master")
	checkOwnedAndLabelled(t, master, job, masterLabels)
	checkPodTemplate(t, "master", &master.Spec.Template, masterLabels)
	// The seed sets neither: "restarted automatically when it failed", as a batch Job is.
	if *master.Spec.BackoffLimit != troupev1.DefaultBackoffLimit || master.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("master Job: backoffLimit %d, activeDeadlineSeconds %v; want the batch Job defaults %d and none",
			*master.Spec.BackoffLimit, master.Spec.ActiveDeadlineSeconds, troupev1.DefaultBackoffLimit)
	}
	if h, sd := master.Spec.Template.Spec.Hostname, master.Spec.Template.Spec.Subdomain; h != "example-job-mn-master" || sd != "example-job-mn" {
		t.Errorf("master pod DNS: hostname %q subdomain %q, want example-job-mn-master under example-job-mn", h, sd)
	}

	got := waitForJob(t, ns, "example-job-mn", "status with observed children", func(j *troupev1.ChainerJob) bool {
		return meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionInitialized)
	})
	if got.Status.Phase != troupev1.JobPending || got.Status.Workers != "0/2" || got.Status.ObservedGeneration != got.Generation {
		t.Errorf("status: phase %q workers %q observedGeneration %d; want Pending, 0/2, %d",
			got.Status.Phase, got.Status.Workers, got.Status.ObservedGeneration, got.Generation)
	}
}

// The labels and annotations users put on their pod templates reach the pods: the CRD keeps
// the templates' metadata instead of pruning it.
func TestTemplateMetadataIsKept(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("meta", ns).WorkerSet("ws0", 1).Obj()
	job.Spec.Master.Template.Labels = map[string]string{"team": "vision"}
	testutil.EditWorkerSet(job, "ws0", func(ws *troupev1.ChainerWorkerSet) {
		ws.Template.Annotations = map[string]string{"prometheus.io/scrape": "true"}
	})
	create(t, job)
	master := waitFor(t, &batchv1.Job{}, ns, "meta-master")
	if master.Spec.Template.Labels["team"] != "vision" {
		t.Errorf("master pod labels = %v, want the user's team=vision", master.Spec.Template.Labels)
	}
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "meta-workerset-ws0")
	if sts.Spec.Template.Annotations["prometheus.io/scrape"] != "true" {
		t.Errorf("worker pod annotations = %v, want the user's", sts.Spec.Template.Annotations)
	}
}

// Workers becoming ready and the master running show in the status.
func TestStatusFollowsChildren(t *testing.T) {
	ns := newNamespace(t)
	create(t, testutil.MakeChainerJob("mn", ns).WorkerSet("ws0", 2).Obj())
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "mn-workerset-ws0")
	setStatus(t, sts, func() { sts.Status.Replicas, sts.Status.ReadyReplicas, sts.Status.AvailableReplicas = 2, 2, 2 })
	master := waitFor(t, &batchv1.Job{}, ns, "mn-master")
	setStatus(t, master, func() {
		master.Status.StartTime = &metav1.Time{Time: time.Now()}
		master.Status.Active, master.Status.Ready = 1, ptr.To[int32](1)
	})
	got := waitForJob(t, ns, "mn", "Running with every worker ready", func(j *troupev1.ChainerJob) bool {
		return j.Status.Phase == troupev1.JobRunning &&
			meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionWorkersReady)
	})
	if got.Status.Workers != "2/2" || got.Status.StartTime == nil {
		t.Errorf("status: workers %q startTime %v; want 2/2 and a start time", got.Status.Workers, got.Status.StartTime)
	}

	// Pods are watched (through the operator's trimmed cache) and counted by set, selected by
	// job UID: an impostor with the job's name label but another UID is not counted.
	impostorLabels := with(sts.Spec.Template.Labels, troupev1.LabelJobUID, "another-job")
	impostor := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "impostor", Namespace: ns, Labels: impostorLabels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "chainer", Image: "chainer:test"}}},
	}
	if err := k8s.Create(context.Background(), impostor); err != nil {
		t.Fatal(err)
	}
	setStatus(t, impostor, func() {
		impostor.Status.Phase = corev1.PodRunning
		impostor.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "chainer", Image: "chainer:test", RestartCount: 5}}
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mn-workerset-ws0-0", Namespace: ns, Labels: sts.Spec.Template.Labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "chainer", Image: "chainer:test"}}},
	}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	setStatus(t, pod, func() {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "chainer", Image: "chainer:test", RestartCount: 3}}
	})
	got = waitForJob(t, ns, "mn", "the worker pod counted", func(j *troupev1.ChainerJob) bool {
		rs := j.Status.ReplicaStatuses
		return len(rs) == 2 && rs[1].Restarts >= 3
	})
	if rs := got.Status.ReplicaStatuses; rs[1].Name != "ws0" || rs[1].Restarts != 3 || rs[1].Active != 1 || got.Status.Pods.Running != 1 {
		t.Errorf("replica statuses = %+v, pods %+v; want ws0 with its 1 running pod and 3 restarts, the impostor not counted",
			rs, got.Status.Pods)
	}
}

// The master completing makes the job Succeeded, releases the workers and sets the
// completion time.
func TestMasterSucceeded(t *testing.T) {
	ns := newNamespace(t)
	create(t, testutil.MakeChainerJob("mn", ns).WorkerSet("ws0", 2).Obj())
	waitFor(t, &appsv1.StatefulSet{}, ns, "mn-workerset-ws0")
	finishMaster(t, ns, "mn", batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods")

	got := waitForJob(t, ns, "mn", "Succeeded", func(j *troupev1.ChainerJob) bool {
		return j.Status.Phase == troupev1.JobSucceeded
	})
	if !meta.IsStatusConditionTrue(got.Status.Conditions, troupev1.ConditionSucceeded) || got.Status.CompletionTime == nil {
		t.Errorf("succeeded job: conditions %v completionTime %v", got.Status.Conditions, got.Status.CompletionTime)
	}
	eventually(t, "workers scaled to zero", func(ctx context.Context) (bool, error) {
		sts := &appsv1.StatefulSet{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mn-workerset-ws0"}, sts)
		return err == nil && *sts.Spec.Replicas == 0, err
	})
	expectEvent(t, ns, "mn", troupev1.EventSucceeded)
}

// A failed master fails the job with the master Job's reason.
func TestMasterFailed(t *testing.T) {
	ns := newNamespace(t)
	create(t, testutil.MakeChainerJob("failing", ns).WorkerSet("ws0", 1).BackoffLimit(1).Obj())
	waitFor(t, &appsv1.StatefulSet{}, ns, "failing-workerset-ws0")
	finishMaster(t, ns, "failing", batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")

	got := waitForJob(t, ns, "failing", "Failed", func(j *troupev1.ChainerJob) bool {
		return j.Status.Phase == troupev1.JobFailed
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionFailed)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "BackoffLimitExceeded" ||
		!strings.Contains(c.Message, "backoff limit") {
		t.Errorf("Failed condition = %+v, want True with reason BackoffLimitExceeded", c)
	}
	if got.Status.CompletionTime == nil {
		t.Errorf("a failed job has no completion time")
	}
	eventually(t, "workers scaled to zero", func(ctx context.Context) (bool, error) {
		sts := &appsv1.StatefulSet{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "failing-workerset-ws0"}, sts)
		return err == nil && *sts.Spec.Replicas == 0, err
	})
	expectEvent(t, ns, "failing", troupev1.EventFailed)
}

// Deleted children come back; a child changed by hand is put back to its desired shape.
func TestChildrenAreRepaired(t *testing.T) {
	ns := newNamespace(t)
	create(t, testutil.MakeChainerJob("mn", ns).WorkerSet("ws0", 2).Obj())
	for _, obj := range []client.Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "mn-workerset-ws0"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mn"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mn-mpi"}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "mn-master"}},
	} {
		old := waitFor(t, obj, ns, obj.GetName())
		oldUID := old.GetUID()
		if err := k8s.Delete(context.Background(), old, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatalf("delete %s: %v", obj.GetName(), err)
		}
		eventually(t, obj.GetName()+" recreated", func(ctx context.Context) (bool, error) {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: obj.GetName()}, obj)
			return err == nil && obj.GetUID() != oldUID, client.IgnoreNotFound(err)
		})
	}

	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "mn-workerset-ws0")
	sts.Spec.Replicas = ptr.To[int32](5)
	if err := k8s.Update(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replicas put back to 2", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), sts)
		return err == nil && *sts.Spec.Replicas == 2, err
	})

	// The ConfigMap's data is put back whole: the edited value, and no key of someone else's.
	cm := waitFor(t, &corev1.ConfigMap{}, ns, "mn-mpi")
	want := maps.Clone(cm.Data)
	cm.Data[mpi.HostfileKey] = "somewhere-else slots=9\n"
	cm.Data["added-by-hand"] = "x"
	if err := k8s.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hostfile put back", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(cm), cm)
		return err == nil && maps.Equal(cm.Data, want), err
	})
}

// An object that already has a child's name and is not the job's is never adopted, changed or
// deleted; the job reports the conflict and starts nothing.
func TestForeignObjectIsNeverTouched(t *testing.T) {
	ns := newNamespace(t)
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "mn-mpi", Namespace: ns, Labels: map[string]string{"owner": "someone"}},
		Data:       map[string]string{"hostfile": "theirs"},
	}
	if err := k8s.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	create(t, testutil.MakeChainerJob("mn", ns).WorkerSet("ws0", 2).Obj())

	got := waitForJob(t, ns, "mn", "the conflict condition", func(j *troupev1.ChainerJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason == troupev1.ReasonChildConflict
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "ConfigMap mn-mpi") {
		t.Errorf("Initialized = %+v, want False naming ConfigMap mn-mpi", c)
	}
	expectEvent(t, ns, "mn", troupev1.EventChildConflict)

	after := &corev1.ConfigMap{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(foreign), after); err != nil {
		t.Fatalf("the foreign ConfigMap is gone: %v", err)
	}
	if after.ResourceVersion != foreign.ResourceVersion || len(after.OwnerReferences) != 0 || after.Data["hostfile"] != "theirs" {
		t.Errorf("the foreign ConfigMap was changed: %+v", after)
	}
	for _, obj := range []client.Object{&batchv1.Job{}, &appsv1.StatefulSet{}} {
		name := map[bool]string{true: "mn-master", false: "mn-workerset-ws0"}[isJob(obj)]
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s was created despite the conflict (err %v)", name, err)
		}
	}
	// The Service comes before the hostfile and holds no pods: a new job's is created without a
	// read first, so it exists, the job's own (deleted with it).
	var svc corev1.Service
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mn"}, &svc); err != nil {
		t.Errorf("the job's Service: %v", err)
	} else if c := metav1.GetControllerOf(&svc); c == nil || c.UID != got.UID {
		t.Errorf("the Service is controlled by %+v, want the job", c)
	}

	// Once the foreign object is gone, the job proceeds.
	if err := k8s.Delete(context.Background(), after); err != nil {
		t.Fatal(err)
	}
	waitForJob(t, ns, "mn", "Initialized after the conflict cleared", func(j *troupev1.ChainerJob) bool {
		return meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionInitialized)
	})
}

// backend none runs the master alone: no hostfile, no workers.
func TestBackendNone(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("solo", ns).Obj()
	job.Spec.Backend = troupev1.ChainerBackendNone
	create(t, job)
	master := waitFor(t, &batchv1.Job{}, ns, "solo-master")
	for _, c := range master.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == mpi.EnvHostfile {
				t.Errorf("backend none: the master has MPI wiring (%s)", e.Name)
			}
		}
	}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "solo-mpi"}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("backend none created a hostfile ConfigMap (err %v)", err)
	}
}

// The CRD refuses a master without the "chainer" container even with no webhook running.
func TestCRDRefusesMasterWithoutMainContainer(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("bad", ns).Obj()
	job.Spec.Master.Template.Spec.Containers[0].Name = "main"
	err := k8s.Create(context.Background(), job)
	if err == nil || !strings.Contains(err.Error(), `spec.master`) || !strings.Contains(err.Error(), `named "chainer"`) {
		t.Errorf("create = %v, want a refusal naming spec.master and the chainer container", err)
	}
}

// A worker set without the "chainer" container (no CEL rule can afford that check) is
// reported on the job, and nothing is created.
func TestWorkerSetWithoutMainContainerIsReported(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("bad", ns).WorkerSet("ws0", 1).Obj()
	job.Spec.WorkerSets["ws0"].Template.Spec.Containers[0].Name = "main"
	create(t, job)
	got := waitForJob(t, ns, "bad", "the InvalidSpec condition", func(j *troupev1.ChainerJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized)
		return c != nil && c.Reason == troupev1.ReasonInvalidSpec
	})
	c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized)
	if !strings.Contains(c.Message, `spec.workerSets[ws0].template.spec.containers`) {
		t.Errorf("Initialized message = %q, want the field path", c.Message)
	}
	expectEvent(t, ns, "bad", troupev1.EventInvalidSpec)
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "bad-master"}, &batchv1.Job{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the master Job was created for an invalid spec (err %v)", err)
	}
}

func isJob(o client.Object) bool { _, ok := o.(*batchv1.Job); return ok }

func create(t *testing.T, job *troupev1.ChainerJob) *troupev1.ChainerJob {
	t.Helper()
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("create ChainerJob: %v", err)
	}
	return job
}

// waitFor waits until the named object exists and returns it.
func waitFor[T client.Object](t *testing.T, obj T, ns, name string) T {
	t.Helper()
	eventually(t, fmt.Sprintf("%T %s", obj, name), func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		return err == nil, err
	})
	return obj
}

func waitForJob(t *testing.T, ns, name, what string, pred func(*troupev1.ChainerJob) bool) *troupev1.ChainerJob {
	t.Helper()
	return waitUntil(t, &troupev1.ChainerJob{}, ns, name, what, pred)
}

// waitUntil waits until the named object exists and satisfies pred, and returns it.
func waitUntil[T client.Object](t *testing.T, obj T, ns, name, what string, pred func(T) bool) T {
	t.Helper()
	eventually(t, fmt.Sprintf("%T %s %s", obj, name, what), func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		return err == nil && pred(obj), err
	})
	return obj
}

// setStatus plays a kube-controller-manager controller: it writes a child's status.
func setStatus(t *testing.T, obj client.Object, mutate func()) {
	t.Helper()
	mutate()
	if err := k8s.Status().Update(context.Background(), obj); err != nil {
		t.Fatalf("update %s status: %v", obj.GetName(), err)
	}
}

// finishMaster writes the terminal status the Job controller would write on a ChainerJob's
// master Job.
func finishMaster(t *testing.T, ns, chainerJob string, outcome batchv1.JobConditionType, reason, msg string) {
	t.Helper()
	job := waitFor(t, &batchv1.Job{}, ns, chainerJob+"-master")
	now := metav1.Now()
	setStatus(t, job, func() {
		job.Status.StartTime = &now
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastProbeTime: now, LastTransitionTime: now},
			{Type: outcome, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastProbeTime: now, LastTransitionTime: now},
		}
		if outcome == batchv1.JobComplete {
			job.Status.Conditions = testutil.JobSucceeded(kubeVersion,
				batchv1.JobCondition{Reason: reason, Message: msg, LastProbeTime: now, LastTransitionTime: now})
			job.Status.Succeeded = 1
			job.Status.CompletionTime = &now
		} else {
			job.Status.Failed = 1
		}
	})
}

func checkOwnedAndLabelled(t *testing.T, obj client.Object, job metav1.Object, labels map[string]string) {
	t.Helper()
	if !metav1.IsControlledBy(obj, job) {
		t.Errorf("%s %s is not controlled by the job: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), obj.GetOwnerReferences())
	}
	for k, v := range labels {
		if obj.GetLabels()[k] != v {
			t.Errorf("%s: label %s = %q, want %q", obj.GetName(), k, obj.GetLabels()[k], v)
		}
	}
}

// checkPodTemplate checks the pod labels and the hostfile wiring of a master or worker pod.
func checkPodTemplate(t *testing.T, role string, tmpl *corev1.PodTemplateSpec, labels map[string]string) {
	t.Helper()
	for k, v := range labels {
		if tmpl.Labels[k] != v {
			t.Errorf("%s pod: label %s = %q, want %q", role, k, tmpl.Labels[k], v)
		}
	}
	c := tmpl.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env[mpi.EnvHostfile] != mpi.HostfilePath || env["OMPI_MCA_orte_default_hostfile"] != mpi.HostfilePath {
		t.Errorf("%s pod: hostfile environment missing: %v", role, env)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.MountPath == mpi.ConfigMountPath && m.SubPath == "")
	}
	if !mounted {
		t.Errorf("%s pod: hostfile not mounted at %s: %v", role, mpi.ConfigMountPath, c.VolumeMounts)
	}
}

func expectEvent(t *testing.T, ns, jobName, reason string) {
	t.Helper()
	eventually(t, "event "+reason, func(ctx context.Context) (bool, error) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == jobName && e.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// Without the webhook (none runs in this suite, as with its failurePolicy Ignore while it is
// down), a job that names another job's generated credentials is still not run: the engine
// reports InvalidSpec naming the field and creates nothing (docs/security.md).
func TestOtherJobsCredentialsRefusedWithoutWebhook(t *testing.T) {
	ns := newNamespace(t)
	thief := testutil.MakeChainerJob("thief", ns).WorkerSet("ws0", 1).Obj()
	thief.Spec.Master.Template.Spec.Volumes = []corev1.Volume{{Name: "keys",
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "victim-ssh"}}}}
	testutil.EditWorkerSet(thief, "ws0", func(ws *troupev1.ChainerWorkerSet) { ws.Template.Spec.ServiceAccountName = "victim-exec" })
	create(t, thief)

	cinder := testutil.MakeChainerJob("cinder", ns).Obj()
	cinder.Spec.Master.Template.Spec.Volumes = []corev1.Volume{{Name: "disk",
		VolumeSource: corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{VolumeID: "v1", SecretRef: &corev1.LocalObjectReference{Name: "victim-ssh"}}}}}
	create(t, cinder)

	for name, fields := range map[string][]string{
		"thief":  {"master.template.spec.volumes[0].secret.secretName", "workerSets[ws0].template.spec.serviceAccountName"},
		"cinder": {"master.template.spec.volumes[0].cinder.secretRef.name"},
	} {
		got := waitForJob(t, ns, name, "the InvalidSpec condition", func(j *troupev1.ChainerJob) bool {
			c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionInitialized)
			return c != nil && c.Reason == troupev1.ReasonInvalidSpec
		})
		c := meta.FindStatusCondition(got.Status.Conditions, troupev1.ConditionInitialized)
		for _, f := range fields {
			if !strings.Contains(c.Message, f) {
				t.Errorf("%s: Initialized message = %q, want it to name %s", name, c.Message, f)
			}
		}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-master"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: the master Job was created (err %v)", name, err)
		}
	}
}
