package realnode

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

var (
	checkpointSaved = regexp.MustCompile(`(?m)^checkpoint of epoch (\d+) saved$`)
	resumedLine     = regexp.MustCompile(`(?m)^resuming from the checkpoint of epoch (\d+) `)
)

// hostPathVolumes makes one hostPath PersistentVolume for each claim, bound to it in advance
// (claimRef), in a directory of the test's own that any user may write: the real node has no
// storage provisioner. The volumes go when the test ends.
func hostPathVolumes(t *testing.T, ns string, claims ...string) {
	t.Helper()
	for _, claim := range claims {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o777); err != nil { // the training runs as user 1000
			t.Fatal(err)
		}
		// Named for the namespace too: a PersistentVolume is the cluster's, and the two checkpoint
		// tests, side by side, claim the same names in namespaces of their own.
		pv := "troupe-test-" + ns + "-" + claim
		mustKubectl(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: %s}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  claimRef: {namespace: %s, name: %s}
  hostPath: {path: %s, type: Directory}
`, pv, ns, claim, dir), "apply", "-f", "-")
		t.Cleanup(func() { _, _ = kubectl("", "delete", "pv", pv, "--wait=false") })
	}
}

// TestCheckpointSurvivesARestart: examples/pytorchjob-checkpoint.yaml (two workers, a claim each
// from runPolicy.storage, rank 0 checkpointing every 2 epochs) on the real node. Once a
// checkpoint is saved, worker 1's pod is deleted: the job restarts as a whole (maxRestarts 1),
// worker 0 gets its claim back, ddp.py resumes from the checkpoint (its log names the epoch) and
// the training ends with an accuracy of at least 0.9.
func TestCheckpointSurvivesARestart(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	needTrainImage(t)
	ns := namespace(t, "realnode-checkpoint")
	describeOnFailure(t, ns)
	const job = "pytorch-checkpoint"
	hostPathVolumes(t, ns, "checkpoints-"+job+"-worker-0", "checkpoints-"+job+"-worker-1")
	cmd := append(slices.Clone(ddpArgs), "--epoch-seconds", "1", "--checkpoint-dir", "/ckpt", "--checkpoint-every", "2")
	mustKubectl(t, pytorchExample(t, "pytorchjob-checkpoint.yaml", cmd), "apply", "-n", ns, "-f", "-")
	start := time.Now()
	saved := waitCheckpoint(t, ns, job, 4)
	t.Logf("checkpoint of epoch %d saved %.0fs after the create; deleting worker 1's pod", saved, time.Since(start).Seconds())
	deleted := time.Now()
	mustKubectl(t, "", "delete", "pod", "-n", ns, "-l", "batch.kubernetes.io/job-name="+job+"-worker-1", "--wait=false")
	resumed := waitResumed(t, ns, job, deleted, 4*time.Minute)
	t.Logf("as a whole: training resumed from a checkpoint %.1fs after the delete (every pod made again)", resumed.Seconds())
	took, err := waitCondition(t, ns, "pytorchjob.troupe.dev/"+job, "Succeeded", 6*time.Minute)
	logs := podLogs(t, ns, job)
	if err != nil {
		t.Fatalf("the job did not succeed: %v\nlogs: %v", err, logs)
	}
	t.Logf("%s Succeeded %.0fs after the delete", job, (resumed + took).Seconds())
	restarts := mustKubectl(t, "", "get", "-n", ns, "pytorchjob/"+job, "-o", "jsonpath={.status.restarts} {.status.conditions[?(@.type==\"Restarting\")].message}")
	if !strings.HasPrefix(restarts, "1 ") {
		t.Errorf("restarts and Restarting message %q, want one restart", restarts)
	}
	t.Logf("restarts: %s", restarts)
	joined := strings.Join(slices.Collect(maps.Values(logs)), "\n")
	m := resumedLine.FindStringSubmatch(joined)
	if m == nil {
		t.Fatalf("no rank resumed from a checkpoint:\n%s", joined)
	}
	if epoch, _ := strconv.Atoi(m[1]); epoch < saved || epoch%2 != 0 {
		t.Errorf("resumed from the checkpoint of epoch %d, want an even epoch from %d on", epoch, saved)
	}
	t.Logf("after the restart: %s", strings.TrimSpace(m[0]))
	checkDDP(t, logs, 2)
}

// waitResumed waits until a rank of the job says it resumed from a checkpoint, and returns how
// long after since.
func waitResumed(t *testing.T, ns, job string, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(500 * time.Millisecond) {
		joined := strings.Join(slices.Collect(maps.Values(podLogs(t, ns, job))), "\n")
		if resumedLine.MatchString(joined) {
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no rank resumed from a checkpoint within %v:\n%s", timeout, joined)
		}
	}
}

// waitCheckpoint waits until rank 0 has saved the checkpoint of epoch at least n, and returns the
// epoch.
func waitCheckpoint(t *testing.T, ns, job string, n int) int {
	t.Helper()
	saved := 0
	for deadline := time.Now().Add(4 * time.Minute); saved < n; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of epoch %d in 4 minutes: %v", n, podLogs(t, ns, job))
		}
		for _, l := range podLogs(t, ns, job) {
			for _, m := range checkpointSaved.FindAllStringSubmatch(l, -1) {
				saved, _ = strconv.Atoi(m[1])
			}
		}
	}
	return saved
}

// inPlaceCheckpointJob is examples/pytorchjob-checkpoint.yaml as a job that restarts in place:
// its workers' restartPolicy OnFailure (the kubelet restarts a container that fails, in its pod,
// with its volume and its node) and no whole-job failure policy. The training runs under a
// shell, so that a test can kill it as the kernel's OOM killer would (the container's first
// process cannot be killed from inside it).
func inPlaceCheckpointJob(t *testing.T) string {
	t.Helper()
	train := append(slices.Clone(ddpArgs), "--epoch-seconds", "1", "--checkpoint-dir", "/ckpt", "--checkpoint-every", "2")
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(pytorchExample(t, "pytorchjob-checkpoint.yaml", []string{"sh", "-c", strings.Join(train, " ")})), &obj); err != nil {
		t.Fatal(err)
	}
	spec := obj["spec"].(map[string]any)
	spec["pytorchReplicaSpecs"].(map[string]any)["Worker"].(map[string]any)["restartPolicy"] = "OnFailure"
	run := spec["runPolicy"].(map[string]any)
	delete(run, "failurePolicy")
	run["backoffLimit"] = 6
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestInPlaceRestartResumesFromCheckpoint (issue 51): the checkpointing DDP job with workers
// that restart in place. Once a checkpoint is saved, worker 1's training process is killed: the
// kubelet restarts its container in the same pod, rank 0's fails on the lost peer and restarts
// the same way, and both resume from the checkpoint on their volumes; no pod is made again, the
// job is not restarted as a whole, and it Succeeds. The time from the kill to the resumed
// training is the in-place restart's cost.
func TestInPlaceRestartResumesFromCheckpoint(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	needTrainImage(t)
	ns := namespace(t, "realnode-inplace")
	describeOnFailure(t, ns)
	const job = "pytorch-checkpoint"
	hostPathVolumes(t, ns, "checkpoints-"+job+"-worker-0", "checkpoints-"+job+"-worker-1")
	mustKubectl(t, inPlaceCheckpointJob(t), "apply", "-n", ns, "-f", "-")
	start := time.Now()
	saved := waitCheckpoint(t, ns, job, 4)
	podsBefore := mustKubectl(t, "", "get", "pods", "-n", ns, "-l", "troupe.dev/job-name="+job, "-o", "jsonpath={.items[*].metadata.uid}")
	worker1 := strings.TrimPrefix(mustKubectl(t, "", "get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name="+job+"-worker-1", "-o", "name"), "pod/")
	worker1 = strings.TrimSpace(worker1)
	t.Logf("checkpoint of epoch %d saved %.0fs after the create; killing the training process of %s", saved, time.Since(start).Seconds(), worker1)
	kill := `import os
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) not in (1, os.getpid()) and b"ddp.py" in open("/proc/%s/cmdline" % p, "rb").read():
        os.kill(int(p), 9)`
	killed := time.Now()
	mustKubectl(t, "", "exec", "-n", ns, worker1, "-c", "pytorch", "--", "python3", "-c", kill)
	resumed := waitResumed(t, ns, job, killed, 4*time.Minute)
	t.Logf("in place: training resumed from a checkpoint %.1fs after the kill", resumed.Seconds())

	took, err := waitCondition(t, ns, "pytorchjob.troupe.dev/"+job, "Succeeded", 6*time.Minute)
	logs := podLogs(t, ns, job)
	if err != nil {
		t.Fatalf("the job did not succeed: %v\nlogs: %v", err, logs)
	}
	t.Logf("%s Succeeded %.0fs after the kill", job, (resumed + took).Seconds())
	if after := mustKubectl(t, "", "get", "pods", "-n", ns, "-l", "troupe.dev/job-name="+job, "-o", "jsonpath={.items[*].metadata.uid}"); after != podsBefore {
		t.Errorf("pods %q after the kill, %q before: want the same pods, restarted in place", after, podsBefore)
	}
	status := mustKubectl(t, "", "get", "-n", ns, "pytorchjob/"+job, "-o", "jsonpath={.status.restarts}")
	if status != "" && status != "0" {
		t.Errorf("restarts %q: the job was restarted as a whole", status)
	}
	counts := mustKubectl(t, "", "get", "pods", "-n", ns, "-l", "troupe.dev/job-name="+job,
		"-o", `jsonpath={range .items[*]}{.metadata.name}={.status.containerStatuses[0].restartCount} {end}`)
	if !strings.Contains(counts, worker1+"=1") {
		t.Errorf("container restarts %q: want %s's container restarted once", counts, worker1)
	}
	t.Logf("container restarts: %s", counts)
	m := resumedLine.FindStringSubmatch(strings.Join(slices.Collect(maps.Values(logs)), "\n"))
	if m == nil {
		t.Fatalf("no rank says it resumed in its current log")
	}
	if epoch, _ := strconv.Atoi(m[1]); epoch < saved || epoch%2 != 0 {
		t.Errorf("resumed from the checkpoint of epoch %d, want an even epoch from %d on", epoch, saved)
	}
	checkDDP(t, logs, 2)
}
