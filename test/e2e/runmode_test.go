package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Simulated pods cannot run commands: a Job's pod ends after its troupe.dev/sim-duration. A
// debug launcher runs `sleep inf`, which never ends; the annotation (on the worker template,
// which the generated launcher copies) stands for that, and the test checks what the pods were
// told to run.
const sleepsForever = "1h"

// jobPods lists the pods of a troupe job by role.
func jobPods(ctx context.Context, ns string, uid string, role string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{troupev1.LabelJobUID: uid, troupev1.LabelRole: role})
	return pods.Items, err
}

func mainCommand(p *corev1.Pod, container string) []string {
	for _, c := range p.Spec.Containers {
		if c.Name == container {
			return append(slices.Clone(c.Command), c.Args...)
		}
	}
	return nil
}

// The T9k guide's two debug examples: the launcher and the workers come up and run, and no
// training starts: the launcher runs `sleep inf`, not mpirun; the workers run sshd (example 2,
// the defaults) or `sleep inf` without their init containers (example 1).
func TestMPIJobDebugModeExamples(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	examples := map[string]struct {
		specs      []troupev1.DebugReplicaSpec
		wantWorker string
	}{
		"debug-defaults": {wantWorker: "/usr/sbin/sshd -D -e -f /etc/troupe/mpi/sshd_config"},
		"debug-sleep": {
			specs:      []troupev1.DebugReplicaSpec{{Type: "worker", SkipInitContainer: true, Command: []string{"sleep", "inf"}}},
			wantWorker: "sleep inf",
		},
	}
	for name, ex := range examples {
		job := loadMPIJob(t, ns)
		job.Name = name
		job.Spec.Worker.Replicas = ptrInt32(2)
		job.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: sleepsForever}
		job.Spec.Worker.Template.Spec.InitContainers = []corev1.Container{{Name: "prepare", Image: "busybox:1"}}
		job.Spec.RunMode = &troupev1.RunMode{Debug: &troupev1.DebugMode{Enabled: true, ReplicaSpecs: ex.specs}}
		if err := k8s.Create(context.Background(), job); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	for name, ex := range examples {
		job := &troupev1.MPIJob{}
		eventually(t, name+" Running with its launcher and 2 workers running", func(ctx context.Context) (bool, error) {
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
				return false, err
			}
			a := job.Status.Aggregate
			return job.Status.Phase == troupev1.JobRunning && job.Status.Workers == "2/2" && a != nil && a.Running == 3, nil
		})
		launchers, err := jobPods(context.Background(), ns, string(job.UID), troupev1.RoleMaster)
		if err != nil || len(launchers) != 1 || launchers[0].Status.Phase != corev1.PodRunning {
			t.Fatalf("%s launcher pods = %d (%v), want one Running", name, len(launchers), err)
		}
		if got := strings.Join(mainCommand(&launchers[0], troupev1.MPILauncherContainer), " "); got != "sleep inf" {
			t.Errorf("%s launcher runs %q, want sleep inf: no training", name, got)
		}
		workers, err := jobPods(context.Background(), ns, string(job.UID), troupev1.RoleWorker)
		if err != nil || len(workers) != 2 {
			t.Fatalf("%s worker pods = %d (%v), want 2", name, len(workers), err)
		}
		for i := range workers {
			w := &workers[i]
			if got := strings.Join(mainCommand(w, troupev1.MPIWorkerContainer), " "); got != ex.wantWorker || w.Status.Phase != corev1.PodRunning {
				t.Errorf("%s worker %s is %s running %q, want Running %q", name, w.Name, w.Status.Phase, got, ex.wantWorker)
			}
			if skipped := len(w.Spec.InitContainers) == 0; skipped != (ex.specs != nil) {
				t.Errorf("%s worker %s init containers = %d, want them skipped: %v", name, w.Name, len(w.Spec.InitContainers), ex.specs != nil)
			}
		}
		if len(job.Status.Tasks) != 2 || job.Status.Tasks[0].Type != "launcher" || len(job.Status.Tasks[1].Status) != 2 {
			t.Errorf("%s status.tasks = %+v, want the launcher and the 2 workers", name, job.Status.Tasks)
		}
	}
}

// watchPhases records every phase the named MPIJob's status goes through until stop is closed.
func watchPhases(t *testing.T, ns, name string) (phases func() []troupev1.JobPhase, stop func()) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = troupev1.AddToScheme(scheme)
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &troupev1.MPIJobList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan troupev1.JobPhase, 1000)
	go func() {
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*troupev1.MPIJob); ok && ev.Type != watch.Deleted && j.Name == name {
				seen <- j.Status.Phase
			}
		}
		close(seen)
	}()
	var got []troupev1.JobPhase
	drain := func() []troupev1.JobPhase {
		for {
			select {
			case p, ok := <-seen:
				if !ok {
					return got
				}
				if len(got) == 0 || got[len(got)-1] != p {
					got = append(got, p)
				}
			default:
				return got
			}
		}
	}
	return drain, w.Stop
}

func setPause(t *testing.T, ns, name string, enabled bool) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := &troupev1.MPIJob{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
			return err
		}
		j.Spec.RunMode.Pause.Enabled = enabled
		return k8s.Update(context.Background(), j)
	})
	if err != nil {
		t.Fatalf("set pause.enabled %v: %v", enabled, err)
	}
}

// The T9k guide's pause example 1, on a running job: pause removes every pod and keeps the job
// (phase Paused); clearing it goes through Resuming back to Running, with the workers skipping
// their init containers and running the resume spec's /usr/bin/sshd; the job then Succeeds.
func TestMPIJobPauseExample(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	job := loadMPIJob(t, ns)
	job.Spec.Worker.Replicas = ptrInt32(2)
	// The launcher runs 20 s (simulated): long enough to be paused while it runs.
	job.Spec.Worker.Template.Annotations = map[string]string{simDurationAnnot: "20s"}
	job.Spec.Worker.Template.Spec.InitContainers = []corev1.Container{{Name: "prepare", Image: "busybox:1"}}
	job.Spec.RunMode = &troupev1.RunMode{Pause: &troupev1.PauseMode{ResumeSpecs: []troupev1.ResumeSpec{
		{Type: "worker", SkipInitContainer: true, Command: []string{"/usr/bin/sshd"}},
	}}}
	phases, stop := watchPhases(t, ns, "mpi-example")
	defer stop()
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	waitForExampleMPIJob(t, ns, "Running with 2 ready workers", func(j *troupev1.MPIJob) bool {
		return j.Status.Phase == troupev1.JobRunning && j.Status.Workers == "2/2"
	})
	firstLauncher := &batchv1.Job{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mpi-example-launcher"}, firstLauncher); err != nil {
		t.Fatal(err)
	}

	setPause(t, ns, "mpi-example", true)
	pausedAt := time.Now()
	eventually(t, "every pod gone, the job Paused", func(ctx context.Context) (bool, error) {
		j := &troupev1.MPIJob{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-example"}, j); err != nil {
			return false, err
		}
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{troupev1.LabelJobUID: string(j.UID)}); err != nil {
			return false, err
		}
		return len(pods.Items) == 0 && j.Status.Phase == troupev1.JobPaused &&
			meta.IsStatusConditionTrue(j.Status.Conditions, troupev1.ConditionPaused), nil
	})
	t.Logf("paused: every pod gone %s after pause.enabled was set", time.Since(pausedAt).Round(100*time.Millisecond))
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(firstLauncher), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("the launcher Job of a paused job: %v, want it deleted", err)
	}

	setPause(t, ns, "mpi-example", false)
	waitForExampleMPIJob(t, ns, "Running again", func(j *troupev1.MPIJob) bool {
		return j.Status.Phase == troupev1.JobRunning && j.Status.Workers == "2/2"
	})
	resumed := &troupev1.MPIJob{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mpi-example"}, resumed); err != nil {
		t.Fatal(err)
	}
	workers, err := jobPods(context.Background(), ns, string(resumed.UID), troupev1.RoleWorker)
	if err != nil || len(workers) != 2 {
		t.Fatalf("resumed worker pods = %d (%v), want 2", len(workers), err)
	}
	for i := range workers {
		if got := mainCommand(&workers[i], troupev1.MPIWorkerContainer); !slices.Equal(got, []string{"/usr/bin/sshd"}) || len(workers[i].Spec.InitContainers) != 0 {
			t.Errorf("resumed worker %s runs %q with %d init containers, want /usr/bin/sshd and none", workers[i].Name, got, len(workers[i].Spec.InitContainers))
		}
	}
	launchers, err := jobPods(context.Background(), ns, string(resumed.UID), troupev1.RoleMaster)
	if err != nil || len(launchers) != 1 || !strings.HasPrefix(strings.Join(mainCommand(&launchers[0], troupev1.MPILauncherContainer), " "), "mpirun") {
		t.Errorf("resumed launcher pods = %d (%v), want one running its mpirun line", len(launchers), err)
	}

	// As for a batch Job, kubectl waits for the Complete condition.
	if out, err := kubectl("wait", "-n", ns, "--for=condition=Complete", "mpijob/mpi-example", "--timeout=60s"); err != nil {
		t.Fatalf("kubectl wait --for=condition=Complete: %v: %s", err, out)
	}
	waitForExampleMPIJob(t, ns, "Succeeded, Completed", func(j *troupev1.MPIJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, troupev1.ConditionCompleted)
		return j.Status.Phase == troupev1.JobSucceeded && j.Status.Succeeded == 1 && c != nil && c.Reason == troupev1.ReasonSucceeded
	})
	// The watch may lag the last write by a moment.
	want := []troupev1.JobPhase{troupev1.JobRunning, troupev1.JobPaused, troupev1.JobResuming, troupev1.JobRunning, troupev1.JobSucceeded}
	var got []troupev1.JobPhase
	eventually(t, "the watch to see the phases", func(context.Context) (bool, error) {
		got = phases()
		return len(got) > 0 && got[len(got)-1] == troupev1.JobSucceeded, nil
	})
	t.Logf("phases seen: %v", got)
	if !isSubsequence(want, got) {
		t.Errorf("phases %v, want them to go through %v", got, want)
	}
}

// isSubsequence reports whether want appears in got in order, other phases in between.
func isSubsequence(want, got []troupev1.JobPhase) bool {
	i := 0
	for _, p := range got {
		if i < len(want) && p == want[i] {
			i++
		}
	}
	return i == len(want)
}
