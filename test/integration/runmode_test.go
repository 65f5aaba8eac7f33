package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/controllers"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// The T9k guide's debug example 1: the launcher sleeps (its wait for the workers may run out
// without failing it), and the workers skip their init containers and sleep.
func TestMPIJobDebugCommands(t *testing.T) {
	ns := newNamespace(t)
	job := t9kMPIJob(t, ns)
	job.Spec.Worker.Template.Spec.InitContainers = []corev1.Container{{Name: "fetch-data", Image: "busybox:1"}}
	job.Spec.RunMode = &troupev1.RunMode{Debug: &troupev1.DebugMode{Enabled: true, ReplicaSpecs: []troupev1.DebugReplicaSpec{
		{Type: troupev1.ReplicaWorker, SkipInitContainer: true, Command: []string{"sleep", "inf"}},
	}}}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}

	launcher := waitFor(t, &batchv1.Job{}, ns, "mpi-example-launcher").Spec.Template.Spec
	if c := launcher.Containers[0]; !cmp.Equal(c.Command, []string{"sleep", "inf"}) || c.Args != nil {
		t.Errorf("launcher runs %q %q, want sleep inf and no mpirun", c.Command, c.Args)
	}
	// The generated launcher is a copy of the worker's pod, init containers included; the
	// launcher's own spec (none here) does not skip them.
	if len(launcher.InitContainers) != 2 || !strings.Contains(strings.Join(launcher.InitContainers[0].Args, " "), "--best-effort") {
		t.Errorf("launcher init containers = %+v, want the wait, best effort, and the worker's", launcher.InitContainers)
	}
	worker := waitFor(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker").Spec.Template.Spec
	if c := worker.Containers[0]; !cmp.Equal(c.Command, []string{"sleep", "inf"}) || len(worker.InitContainers) != 0 {
		t.Errorf("workers run %q with init containers %v, want sleep inf and none", c.Command, worker.InitContainers)
	}

	// Debug mode cannot be turned off (or changed) once the job exists; the CRD says so.
	err := updateMPIJob(t, ns, "mpi-example", func(j *troupev1.MPIJob) { j.Spec.RunMode.Debug.Enabled = false })
	if err == nil || !strings.Contains(err.Error(), "runMode.debug: cannot change once the job exists") {
		t.Errorf("turning debug off: %v, want a refusal", err)
	}
}

// Pause deletes the launcher Job and its pod and scales the workers to zero, keeping the job;
// clearing it brings them back with the resume specs, holding the new launcher until the old
// one's pod is gone; the job then runs to its end.
func TestMPIJobPauseAndResume(t *testing.T) {
	ns := newNamespace(t)
	job := t9kMPIJob(t, ns)
	job.Spec.RunMode = &troupev1.RunMode{Pause: &troupev1.PauseMode{ResumeSpecs: []troupev1.ResumeSpec{
		{Type: troupev1.ReplicaWorker, SkipInitContainer: true, Command: []string{"/usr/bin/sshd"}},
		{Type: troupev1.ReplicaLauncher, Args: []string{"--resumed"}},
	}}}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	first := waitFor(t, &batchv1.Job{}, ns, "mpi-example-launcher")
	if c := first.Spec.Template.Spec.Containers[0]; c.Args != nil || !strings.HasPrefix(strings.Join(c.Command, " "), "mpirun") {
		t.Errorf("launcher before any pause runs %q %q, want its mpirun line without the resume args", c.Command, c.Args)
	}
	// The launcher's pod, as the Job controller would create it; a finalizer keeps it
	// terminating after its deletion, as the Job controller's tracking finalizer does.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "mpi-example-launcher-abcde", Namespace: ns, Finalizers: []string{"test.troupe.dev/hold"},
			Labels: map[string]string{
				controllers.MPIJobNameLabel: "mpi-example", troupev1.LabelJobUID: string(job.UID), troupev1.LabelRole: troupev1.RoleMaster,
			},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mpi-launcher", Image: "mpi:1"}}},
	}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	setStatus(t, first, func() { first.Status.Active = 1; first.Status.Ready = ptr.To[int32](1) })
	waitForMPIJob(t, ns, "mpi-example", "Running", func(j *troupev1.MPIJob) bool { return j.Status.Phase == troupev1.JobRunning })

	if err := updateMPIJob(t, ns, "mpi-example", func(j *troupev1.MPIJob) { j.Spec.RunMode.Pause.Enabled = true }); err != nil {
		t.Fatalf("pause: %v", err)
	}
	paused := waitForMPIJob(t, ns, "mpi-example", "Paused", func(j *troupev1.MPIJob) bool {
		return j.Status.Phase == troupev1.JobPaused && meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionPaused)
	})
	eventually(t, "launcher Job deleted, its pod deleting, workers at zero", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(first), &batchv1.Job{})
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		var sts appsv1.StatefulSet
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example-worker"}, &sts); err != nil {
			return false, err
		}
		return !pod.DeletionTimestamp.IsZero() && *sts.Spec.Replicas == 0, nil
	})
	if paused.Status.Aggregate == nil || paused.Status.Aggregate.Creating != 0 {
		t.Errorf("paused job's aggregate = %+v, want nothing being created", paused.Status.Aggregate)
	}

	if err := updateMPIJob(t, ns, "mpi-example", func(j *troupev1.MPIJob) { j.Spec.RunMode.Pause.Enabled = false }); err != nil {
		t.Fatalf("resume: %v", err)
	}
	waitForMPIJob(t, ns, "mpi-example", "Resuming", func(j *troupev1.MPIJob) bool { return j.Status.Phase == troupev1.JobResuming })
	sts := waitUntil(t, &appsv1.StatefulSet{}, ns, "mpi-example-worker", "scaled back up", func(s *appsv1.StatefulSet) bool { return *s.Spec.Replicas == 5 })
	if c := sts.Spec.Template.Spec.Containers[0]; !cmp.Equal(c.Command, []string{"/usr/bin/sshd"}) {
		t.Errorf("resumed workers run %q, want the resume spec's /usr/bin/sshd", c.Command)
	}
	// The old launcher's pod is still terminating: no new launcher yet.
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(first), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a new launcher Job exists while the old launcher pod terminates (%v)", err)
	}
	pod.Finalizers = nil
	if err := k8s.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	second := waitFor(t, &batchv1.Job{}, ns, "mpi-example-launcher")
	if second.UID == first.UID {
		t.Fatalf("the launcher Job was not recreated")
	}
	if c := second.Spec.Template.Spec.Containers[0]; !cmp.Equal(c.Args, []string{"--resumed"}) || !strings.HasPrefix(strings.Join(c.Command, " "), "mpirun") {
		t.Errorf("resumed launcher runs %q %q, want its mpirun line with the resume args", c.Command, c.Args)
	}

	setStatus(t, second, func() { second.Status.Active = 1; second.Status.Ready = ptr.To[int32](1) })
	waitForMPIJob(t, ns, "mpi-example", "Running again", func(j *troupev1.MPIJob) bool { return j.Status.Phase == troupev1.JobRunning })
	now := metav1.Now()
	setStatus(t, second, func() {
		second.Status.Active, second.Status.Ready, second.Status.Succeeded = 0, ptr.To[int32](0), 1
		second.Status.StartTime, second.Status.CompletionTime = &now, &now
		second.Status.Conditions = testutil.JobSucceeded(kubeVersion, batchv1.JobCondition{LastTransitionTime: now})
	})
	done := waitForMPIJob(t, ns, "mpi-example", "Succeeded", func(j *troupev1.MPIJob) bool { return j.Status.Phase == troupev1.JobSucceeded })
	for _, want := range []struct{ typ, reason string }{
		{troupev1.ConditionCompleted, troupev1.ReasonSucceeded},
		{troupev1.ConditionComplete, troupev1.ReasonMasterSucceeded},
	} {
		if c := meta.FindStatusCondition(done.Status.Conditions, want.typ); c == nil || c.Status != metav1.ConditionTrue || c.Reason != want.reason {
			t.Errorf("%s = %+v, want True/%s", want.typ, c, want.reason)
		}
	}
	if c := meta.FindStatusCondition(done.Status.Conditions, troupev1.ConditionPaused); c == nil || c.Reason != troupev1.ReasonResumed {
		t.Errorf("Paused = %+v, want False/Resumed", c)
	}
	if done.Status.Succeeded != 1 || done.Status.StartTime == nil || done.Status.CompletionTime == nil {
		t.Errorf("succeeded %d, startTime %v, completionTime %v; want 1 and both times", done.Status.Succeeded, done.Status.StartTime, done.Status.CompletionTime)
	}
}

// The resume specs cannot change once the job exists, with or without a pause; pause.enabled
// can. The CRD alone (no webhook here) refuses.
func TestResumeSpecsAreImmutable(t *testing.T) {
	ns := newNamespace(t)
	job := t9kMPIJob(t, ns)
	job.Spec.RunMode = &troupev1.RunMode{Pause: &troupev1.PauseMode{Enabled: true, ResumeSpecs: []troupev1.ResumeSpec{
		{Type: troupev1.ReplicaWorker, Command: []string{"/usr/bin/sshd"}},
	}}}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	refused := map[string]func(*troupev1.MPIJob){
		"a command changed": func(j *troupev1.MPIJob) { j.Spec.RunMode.Pause.ResumeSpecs[0].Command = []string{"sleep", "inf"} },
		"a spec added": func(j *troupev1.MPIJob) {
			j.Spec.RunMode.Pause.ResumeSpecs = append(j.Spec.RunMode.Pause.ResumeSpecs, troupev1.ResumeSpec{Type: troupev1.ReplicaLauncher, SkipInitContainer: true})
		},
		"the specs removed":    func(j *troupev1.MPIJob) { j.Spec.RunMode.Pause.ResumeSpecs = nil },
		"the run mode removed": func(j *troupev1.MPIJob) { j.Spec.RunMode = nil },
	}
	for name, mutate := range refused {
		if err := updateMPIJob(t, ns, "mpi-example", mutate); err == nil || !strings.Contains(err.Error(), "runMode.pause.resumeSpecs: cannot change once the job exists") {
			t.Errorf("%s: %v, want a refusal naming runMode.pause.resumeSpecs", name, err)
		}
	}
	for _, enabled := range []bool{false, true, false} {
		if err := updateMPIJob(t, ns, "mpi-example", func(j *troupev1.MPIJob) { j.Spec.RunMode.Pause.Enabled = enabled }); err != nil {
			t.Errorf("setting pause.enabled to %v: %v, want it allowed", enabled, err)
		}
	}

	// A job created without resume specs cannot get them later either.
	other := t9kMPIJob(t, ns)
	other.Name = "no-resume"
	if err := k8s.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	err := updateMPIJob(t, ns, "no-resume", func(j *troupev1.MPIJob) {
		j.Spec.RunMode = &troupev1.RunMode{Pause: &troupev1.PauseMode{Enabled: true, ResumeSpecs: []troupev1.ResumeSpec{{Type: troupev1.ReplicaWorker}}}}
	})
	if err == nil || !strings.Contains(err.Error(), "runMode.pause.resumeSpecs") {
		t.Errorf("adding resume specs to a running job: %v, want a refusal", err)
	}
	if err := updateMPIJob(t, ns, "no-resume", func(j *troupev1.MPIJob) {
		j.Spec.RunMode = &troupev1.RunMode{Pause: &troupev1.PauseMode{Enabled: true}}
	}); err != nil {
		t.Errorf("pausing a job created without a run mode: %v, want it allowed", err)
	}
}

// updateMPIJob applies mutate to the stored MPIJob and returns the API server's answer, reading
// again when the operator's status write raced it.
func updateMPIJob(t *testing.T, ns, name string, mutate func(*troupev1.MPIJob)) error {
	t.Helper()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var j troupev1.MPIJob
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &j); err != nil {
			return err
		}
		mutate(&j)
		return k8s.Update(context.Background(), &j)
	})
}

// t9kMPIJob is the T9k guide's mpi-example (examples/mpijob.yaml) in namespace ns.
func t9kMPIJob(t *testing.T, ns string) *troupev1.MPIJob {
	t.Helper()
	return testutil.Load[*troupev1.MPIJob](t, exampleMPIJob, ns)
}

// A ChainerJob created paused (the guide's pause example 2 shape) creates no master Job and no
// worker pods; unpaused, its master Job comes with the master's resume spec, and status.tasks
// names its master "master".
func TestChainerJobCreatedPaused(t *testing.T) {
	ns := newNamespace(t)
	job := testutil.MakeChainerJob("paused", ns).WorkerSet("ws0", 2).Obj()
	job.Spec.RunMode = &troupev1.RunMode{Pause: &troupev1.PauseMode{Enabled: true, ResumeSpecs: []troupev1.ResumeSpec{
		{Type: troupev1.ReplicaMaster, Command: []string{"mpiexec", "-n", "3", "train", "--resume"}},
	}}}
	create(t, job)
	got := waitForJob(t, ns, "paused", "Paused", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobPaused })
	if len(got.Status.Tasks) != 2 || got.Status.Tasks[0].Type != troupev1.ReplicaMaster || got.Status.Aggregate == nil || got.Status.Aggregate.Creating != 0 {
		t.Errorf("paused job's tasks %+v, aggregate %+v; want master and worker tasks and nothing being created", got.Status.Tasks, got.Status.Aggregate)
	}
	sts := waitFor(t, &appsv1.StatefulSet{}, ns, "paused-workerset-ws0")
	if *sts.Spec.Replicas != 0 {
		t.Errorf("a paused job's worker set has %d replicas, want 0", *sts.Spec.Replicas)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "paused-master"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a job created paused has a master Job (%v)", err)
	}

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var j troupev1.ChainerJob
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "paused"}, &j); err != nil {
			return err
		}
		j.Spec.RunMode.Pause.Enabled = false
		return k8s.Update(context.Background(), &j)
	})
	if err != nil {
		t.Fatal(err)
	}
	master := waitFor(t, &batchv1.Job{}, ns, "paused-master")
	if c := master.Spec.Template.Spec.Containers[0]; !cmp.Equal(c.Command, []string{"mpiexec", "-n", "3", "train", "--resume"}) {
		t.Errorf("resumed master runs %q, want the resume spec's command", c.Command)
	}
	waitForJob(t, ns, "paused", "Resuming", func(j *troupev1.ChainerJob) bool { return j.Status.Phase == troupev1.JobResuming })
}
