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
		pv := "troupe-test-" + claim
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
	needOperator(t)
	needTrainImage(t)
	ns := namespace(t, "realnode-checkpoint")
	describeOnFailure(t, ns)
	const job = "pytorch-checkpoint"
	hostPathVolumes(t, ns, "checkpoints-"+job+"-worker-0", "checkpoints-"+job+"-worker-1")
	cmd := append(slices.Clone(ddpArgs), "--epoch-seconds", "1", "--checkpoint-dir", "/ckpt", "--checkpoint-every", "2")
	mustKubectl(t, pytorchExample(t, "pytorchjob-checkpoint.yaml", cmd), "apply", "-n", ns, "-f", "-")
	start := time.Now()
	saved := 0
	for deadline := time.Now().Add(4 * time.Minute); saved < 4; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of epoch 4 in 4 minutes: %v", podLogs(t, ns, job))
		}
		for _, l := range podLogs(t, ns, job) {
			for _, m := range checkpointSaved.FindAllStringSubmatch(l, -1) {
				saved, _ = strconv.Atoi(m[1])
			}
		}
	}
	t.Logf("checkpoint of epoch %d saved %.0fs after the create; deleting worker 1's pod", saved, time.Since(start).Seconds())
	mustKubectl(t, "", "delete", "pod", "-n", ns, "-l", "batch.kubernetes.io/job-name="+job+"-worker-1", "--wait=false")
	took, err := waitCondition(t, ns, "pytorchjob.troupe.dev/"+job, "Succeeded", 6*time.Minute)
	logs := podLogs(t, ns, job)
	if err != nil {
		t.Fatalf("the job did not succeed: %v\nlogs: %v", err, logs)
	}
	t.Logf("%s Succeeded %.0fs after the delete", job, took.Seconds())
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
