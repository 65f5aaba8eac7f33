package realnode

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// stuckJobManifest is a ChainerJob on the real node whose master waits for its one worker
// (KubeExec) and whose worker runs image with command.
func stuckJobManifest(name, image, command string) string {
	return fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: ChainerJob
metadata: {name: %[1]s}
spec:
  backend: mpi
  master:
    template:
      spec:
%[2]s        containers:
        - name: chainer
          image: %[3]s
          imagePullPolicy: IfNotPresent
          command: [sh, -c, "mpiexec -n 2 -N 1 hostname"]
  workerSets:
    ws0:
      replicas: 1
      template:
        spec:
%[6]s          containers:
          - name: chainer
            image: %[4]s
            imagePullPolicy: IfNotPresent
            command: [sh, -c, %[5]q]
`, name, pinned(8), mpiImage, image, command, pinned(10))
}

// waitJSONPath waits until a troupe job's jsonpath expression has the value want, as a user's
// kubectl wait does, and returns how long it took.
func waitJSONPath(t *testing.T, ns, resource, expr, want string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	out, err := kubectl("", "wait", "-n", ns, resource, fmt.Sprintf("--for=jsonpath=%s=%s", expr, want),
		fmt.Sprintf("--timeout=%ds", int(timeout.Seconds())))
	if err != nil {
		t.Fatalf("%s: %s never became %s within %s: %v\n%s", resource, expr, want, timeout, err, out)
	}
	return time.Since(start)
}

// TestStuckJobSaysWhy: two jobs that cannot start, each for a common reason, say why in their
// status on a real kubelet: a worker image that cannot be pulled (ImagePullBackOff) and a
// worker that exits at start (CrashLoopBackOff, with its exit code and the end of its log),
// each within 30 s, in the WorkersReady condition and kubectl get's REASON column. The
// crash-looping job fails once its worker was restarted runPolicy.workerRestartLimit times (3
// by default), not after the launcher's 300 s wait, and each cause is one event.
func TestStuckJobSaysWhy(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	ns := namespace(t, "realnode-stuck")
	describeOnFailure(t, ns)
	mustKubectl(t, stuckJobManifest("nopull", "registry.invalid/nope:1", "sleep 600")+"---\n"+
		stuckJobManifest("crash", mpiImage, "echo missing-dependency >&2; exit 3"), "apply", "-n", ns, "-f", "-")

	took := waitJSONPath(t, ns, "chainerjob.troupe.dev/nopull", "{.status.reason}", "ImagePullBackOff", 2*time.Minute)
	t.Logf("nopull: status.reason ImagePullBackOff %.0fs after the job was created", took.Seconds())
	if took > 30*time.Second {
		t.Errorf("the image pull failure took %.0fs to reach the job's status, want 30s at most", took.Seconds())
	}
	msg := mustKubectl(t, "", "get", "-n", ns, "chainerjob.troupe.dev/nopull", "-o",
		`jsonpath={.status.conditions[?(@.type=="WorkersReady")].reason}: {.status.conditions[?(@.type=="WorkersReady")].message}`)
	t.Logf("nopull WorkersReady: %s", msg)
	if !strings.HasPrefix(msg, "ImagePullBackOff: ") || !strings.Contains(msg, "ws0: ImagePullBackOff on pod (nopull-workerset-ws0-0)") ||
		!strings.Contains(msg, "registry.invalid/nope:1") {
		t.Errorf("nopull's WorkersReady does not name the image that cannot be pulled: %s", msg)
	}

	took = waitJSONPath(t, ns, "chainerjob.troupe.dev/crash", "{.status.reason}", "CrashLoopBackOff", 2*time.Minute)
	t.Logf("crash: status.reason CrashLoopBackOff %.0fs after the job was created", took.Seconds())
	if took > 30*time.Second {
		t.Errorf("the worker's crash took %.0fs to reach the job's status, want 30s at most", took.Seconds())
	}
	msg = mustKubectl(t, "", "get", "-n", ns, "chainerjob.troupe.dev/crash", "-o",
		`jsonpath={.status.conditions[?(@.type=="WorkersReady")].message}`)
	t.Logf("crash WorkersReady: %s", msg)
	if !strings.Contains(msg, "container chainer exited 3 (Error)") || !strings.Contains(msg, "missing-dependency") {
		t.Errorf("crash's WorkersReady does not give the exit code and the end of the log: %s", msg)
	}

	out := mustKubectl(t, "", "get", "-n", ns, "chainerjobs.troupe.dev")
	t.Logf("kubectl get:\n%s", out)
	if !strings.Contains(out, "REASON") || !strings.Contains(out, "ImagePullBackOff") {
		t.Errorf("kubectl get does not show the cause in its REASON column:\n%s", out)
	}

	took, err := waitCondition(t, ns, "chainerjob.troupe.dev/crash", "Failed", 4*time.Minute)
	if err != nil {
		t.Fatalf("the crash-looping job did not fail: %v", err)
	}
	t.Logf("crash: Failed %.0fs later", took.Seconds())
	failed := mustKubectl(t, "", "get", "-n", ns, "chainerjob.troupe.dev/crash", "-o",
		`jsonpath={.status.reason}: {.status.conditions[?(@.type=="Failed")].message}`)
	t.Logf("crash Failed: %s", failed)
	if !strings.HasPrefix(failed, "WorkerCrashLooping: worker pod crash-workerset-ws0-0 crash-looped: container chainer exited 3 (Error), restarted 3 times") ||
		!strings.Contains(failed, "missing-dependency") || !strings.HasSuffix(failed, "(runPolicy.workerRestartLimit: 3)") {
		t.Errorf("the crash-looping job's failure: %s", failed)
	}

	// One event per cause, however many passes saw it: one Event object, told once (no series).
	all := mustKubectl(t, "", "get", "events.events.k8s.io", "-n", ns,
		"-o", `jsonpath={range .items[*]}{.regarding.name}|{.reason}|series={.series.count}|{.note}{"\n"}{end}`)
	var crashEvents []string
	for _, l := range strings.Split(strings.TrimSpace(all), "\n") {
		if strings.HasPrefix(l, "crash|CrashLoopBackOff|") {
			crashEvents = append(crashEvents, l)
		}
	}
	t.Logf("CrashLoopBackOff events of the job: %q", crashEvents)
	if len(crashEvents) != 1 || !strings.HasPrefix(crashEvents[0], "crash|CrashLoopBackOff|series=|") {
		t.Errorf("CrashLoopBackOff events of the job: %q, want exactly one, told once", crashEvents)
	}
}
