// Command restart measures what a whole-job restart costs on the simulated cluster (issue 51;
// docs/performance.md, "Restarts"), beside what starting the job fresh costs: a 1+N MPIJob in
// troupe's form with runPolicy.failurePolicy, created until every pod runs; then one worker
// fails (its pod marked Failed by the kubelet's words, as for an evicted pod) and the job
// restarts as a whole, until every pod of the next attempt runs; then a rank crashes (the
// launcher's pod fails, as when mpirun exits on a lost rank) and its Job makes a new launcher
// against the same workers, until every pod runs again. The cluster is
// hack/controlplane/cluster-up.sh's at Kubernetes' default client rates (kube-controller-manager
// 20 QPS), with make bench's nodes; the operator runs as a process (pkg/testing.StartOperator).
//
//	go run ./test/bench/restart -workers 64 -repeats 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

func main() {
	workers := flag.Int("workers", 64, "workers of the MPIJob (plus its launcher)")
	repeats := flag.Int("repeats", 3, "jobs measured one after another")
	cluster := flag.String("cluster", "troupe-bench-restart", "name of the simulated cluster (made, then deleted)")
	keep := flag.Bool("keep", false, "leave the cluster running at the end")
	flag.Parse()
	if err := run(*workers, *repeats, *cluster, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "restart:", err)
		os.Exit(1)
	}
}

func run(workers, repeats int, cluster string, keep bool) (err error) {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	vars := []string{"CLUSTER_NAME=" + cluster, "CLUSTER_ADDONS=", "NODES=" + filepath.Join(root, "test", "bench", "controllers", "nodes.yaml")}
	defer func() {
		if !keep {
			if _, derr := script(root, "hack/controlplane/cluster-down.sh", vars...); derr != nil && err == nil {
				err = derr
			}
		}
	}()
	out, err := script(root, "hack/controlplane/cluster-up.sh", vars...)
	if err != nil {
		return fmt.Errorf("cluster-up: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	kubeconfig := strings.TrimSpace(lines[len(lines)-1])
	if out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", filepath.Join(root, "config", "crds")).CombinedOutput(); err != nil {
		return fmt.Errorf("install CRDs: %w\n%s", err, out)
	}
	op, err := testutil.StartOperator(root, kubeconfig, "")
	if err != nil {
		return err
	}
	defer op.Stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = troupev1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx := context.Background()
	var fresh, restart, retry []time.Duration
	for i := range repeats {
		f, r, l, err := measure(ctx, c, fmt.Sprintf("restart-%d", i), workers)
		if err != nil {
			return fmt.Errorf("round %d: %w (operator log %s)", i, err, op.LogPath)
		}
		fmt.Printf("round %d: 1+%d pods: every pod Running %.1fs after the create; again %.1fs after a worker failed; "+
			"again %.1fs after the launcher failed (its workers kept)\n", i, workers, f.Seconds(), r.Seconds(), l.Seconds())
		fresh, restart, retry = append(fresh, f), append(restart, r), append(retry, l)
	}
	spread := func(d []time.Duration) string {
		return fmt.Sprintf("%.1fs (%.1f-%.1f)", median(d).Seconds(), slices.Min(d).Seconds(), slices.Max(d).Seconds())
	}
	fmt.Printf("1+%d MPIJob, %d rounds: start fresh median %s; whole-job restart median %s; launcher retried, workers kept, median %s\n",
		workers, repeats, spread(fresh), spread(restart), spread(retry))
	return nil
}

// measure runs one job in a namespace of its own: how long until every pod runs, how long
// from a worker's failure until every pod of the next attempt runs, and how long from the
// launcher's failure until a new launcher runs beside the same workers.
func measure(ctx context.Context, c client.Client, ns string, workers int) (fresh, restart, retry time.Duration, err error) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"troupe.dev/jobs": "enabled"}}}); err != nil {
		return 0, 0, 0, err
	}
	// The simulated pods run for an hour (hack/controlplane/pod-stages.yaml); the generated
	// launcher copies the workers' annotations.
	job := &troupev1.MPIJob{}
	if err := yaml.UnmarshalStrict([]byte(fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: MPIJob
metadata: {name: train, namespace: %s}
spec:
  worker:
    replicas: %d
    cmd: [./train]
    template:
      metadata:
        annotations: {troupe.dev/sim-duration: 3600s}
      spec:
        containers:
        - {name: mpi-worker, image: example/mpi:1, resources: {requests: {cpu: 50m}}}
  runPolicy:
    failurePolicy: {maxRestarts: 1}
`, ns, workers)), job); err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	if err := c.Create(ctx, job); err != nil {
		return 0, 0, 0, fmt.Errorf("create: %w", err)
	}
	if err := allRunning(ctx, c, ns, workers+1, "0"); err != nil {
		return 0, 0, 0, err
	}
	fresh = time.Since(start)
	victim := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "train-worker-0"}, victim); err != nil {
		return 0, 0, 0, err
	}
	failed := victim.DeepCopy()
	failed.Status.Phase, failed.Status.Reason, failed.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	start = time.Now()
	if err := c.Status().Patch(ctx, failed, client.MergeFrom(victim)); err != nil {
		return 0, 0, 0, fmt.Errorf("fail worker 0: %w", err)
	}
	if err := allRunning(ctx, c, ns, workers+1, "1"); err != nil {
		return 0, 0, 0, err
	}
	restart = time.Since(start)
	if retry, err = launcherRetry(ctx, c, ns, workers); err != nil {
		return 0, 0, 0, err
	}
	// The next round starts once this one's namespace is gone: 65 pods deleted by the
	// namespace controller beside the next round's creates made its whole-job restart meet
	// pods of its new attempt deleted under it (twice, round 1, on a loaded machine).
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, 0, 0, err
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	return fresh, restart, retry, err
}

// launcherRetry fails the running launcher's pod as mpirun exits on a crashed rank (exit code
// 1) and measures until its Job's new launcher runs; the workers must be the same pods.
func launcherRetry(ctx context.Context, c client.Client, ns string, workers int) (time.Duration, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	var launcher *corev1.Pod
	kept := map[string]bool{}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Labels[troupev1.LabelRole] == troupev1.RoleMaster {
			launcher = p
		} else {
			kept[string(p.UID)] = true
		}
	}
	if launcher == nil || len(kept) != workers {
		return 0, fmt.Errorf("want 1 launcher and %d workers running, found %d pods", workers, len(pods.Items))
	}
	failed := launcher.DeepCopy()
	failed.Status.Phase = corev1.PodFailed
	for i := range failed.Status.ContainerStatuses {
		failed.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
	}
	start := time.Now()
	if err := c.Status().Patch(ctx, failed, client.MergeFrom(launcher)); err != nil {
		return 0, fmt.Errorf("fail the launcher: %w", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		var job troupev1.MPIJob
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "train"}, &job); err != nil {
			return false, err
		}
		if st := job.Status; st.Phase == troupev1.JobFailed || st.Phase == troupev1.JobRestarting {
			c := meta.FindStatusCondition(st.Conditions, string(st.Phase))
			if c == nil {
				c = meta.FindStatusCondition(st.Conditions, troupev1.ConditionRestarting)
			}
			return false, fmt.Errorf("the job is %s while its launcher is retried: %v", st.Phase, c)
		}
		running, newLauncher := 0, false
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
				continue
			}
			switch {
			case p.Labels[troupev1.LabelRole] == troupev1.RoleMaster:
				newLauncher = newLauncher || p.UID != launcher.UID
			case !kept[string(p.UID)]:
				return false, fmt.Errorf("worker pod %s is new: the launcher's retry made workers again", p.Name)
			}
			running++
		}
		return newLauncher && running == workers+1, nil
	})
	return time.Since(start), err
}

// allRunning waits until the namespace holds exactly n pods, all Running and of the attempt.
func allRunning(ctx context.Context, c client.Client, ns string, n int, attempt string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Labels[troupev1.LabelRestartAttempt] == attempt {
				running++
			}
		}
		return running == n && len(pods.Items) == n, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("not every one of %d pods of attempt %s Running in 10 minutes", n, attempt)
	}
	return err
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// script runs one of the repository's scripts with extra environment and returns its stdout.
func script(root, path string, env ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, path))
	cmd.Env = append(os.Environ(), env...)
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	err := cmd.Run()
	return stdout.String(), err
}
