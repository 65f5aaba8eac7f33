package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// The operator and the training image are needed by the job tests only: the smoke tests run
// without them, and a run of those alone (-run TestNodes) neither builds the operator nor
// imports the 2.4 GB image.
var (
	operatorMu   sync.Mutex
	operatorProc *testutil.Operator

	trainOnce sync.Once
	trainErr  error
)

const trainImage = "ghcr.io/troupe-dev/troupe-train:v0.1.0"

// needOperator installs the CRDs and starts troupe-operator against the cluster, as the e2e
// suite runs it (a local process serving its admission webhooks), unless it runs already;
// stopOperator stops it (TestMain at the end, and TestInstall, whose in-cluster installs replace
// the local webhooks and delete the CRDs when they are uninstalled: the next job test starts it
// again).
func needOperator(t *testing.T) {
	t.Helper()
	operatorMu.Lock()
	defer operatorMu.Unlock()
	if operatorProc != nil {
		return
	}
	start := time.Now()
	if out, err := kubectl("", "apply", "--server-side", "-f", filepath.Join(repoRoot, "config", "crds")); err != nil {
		t.Fatalf("install CRDs: %v\n%s", err, out)
	}
	// The pods report their progress to the operator on this machine at the real node's IP
	// (docs/progress.md; StartOperator, hack/progress-local.sh).
	if os.Getenv("TROUPE_PROGRESS_HOST") == "" {
		ip, err := kubectl("", "get", "nodes", "-l", nodeLabel+"=true", "-o", `jsonpath={.items[0].status.addresses[?(@.type=="InternalIP")].address}`)
		if err != nil || strings.TrimSpace(ip) == "" {
			t.Fatalf("the real node's IP: %v %q", err, ip)
		}
		if err := os.Setenv("TROUPE_PROGRESS_HOST", strings.TrimSpace(ip)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := testutil.StartOperator(repoRoot, kubeconfig, os.Getenv("TROUPE_REALNODE_OPERATOR_LOG"))
	if err != nil {
		t.Fatalf("start the operator: %v", err)
	}
	operatorProc = p
	t.Logf("operator ready in %.1fs (log %s)", time.Since(start).Seconds(), p.LogPath)
}

// stopOperator stops the local operator of needOperator and removes what its start put in the
// cluster (testutil.RemoveOperatorSetup: its webhook configurations, the metrics reader's
// ClusterRole, the namespace troupe-system), so that an install that follows makes them itself,
// as on a cluster troupe was never run on.
func stopOperator() {
	operatorMu.Lock()
	defer operatorMu.Unlock()
	if operatorProc != nil {
		operatorProc.Stop()
		fmt.Fprintln(os.Stderr, "operator log:", operatorProc.LogPath)
		operatorProc = nil
		if err := testutil.RemoveOperatorSetup(repoRoot, kubeconfig); err != nil {
			fmt.Fprintln(os.Stderr, "remove the local operator's setup:", err)
		}
	}
}

// needTrainImage imports troupe-train into the real node (built by make images, cached), once.
func needTrainImage(t *testing.T) {
	t.Helper()
	trainOnce.Do(func() {
		start := time.Now()
		cmd := exec.Command(filepath.Join(repoRoot, "hack", "controlplane", "realnode-images.sh"), "troupe-train")
		out, err := cmd.CombinedOutput()
		trainErr = err
		if err == nil {
			t.Logf("troupe-train imported into the real node in %.1fs", time.Since(start).Seconds())
		} else {
			trainErr = fmt.Errorf("%w\n%s", trainErr, out)
		}
	})
	if trainErr != nil {
		t.Fatalf("import troupe-train: %v", trainErr)
	}
}

// realNodePod is the spec of a pod on the real node (pinned) with one container of the
// troupe-mpi image running command, indented for a template's spec at indent.
func realNodePod(indent int, container, command string) string {
	p := strings.Repeat(" ", indent)
	return fmt.Sprintf("%[1]s%[2]scontainers:\n%[2]s- name: %[3]s\n%[2]s  image: %[4]s\n%[2]s  imagePullPolicy: IfNotPresent\n%[2]s  command: [sh, -c, %[5]q]\n",
		pinned(indent), p, container, mpiImage, command)
}

// realNodeChainerJob is a ChainerJob (backend mpi: its launcher waits for the worker with
// troupe-wait) of a master and one worker on the real node, running masterCommand and
// workerCommand; extra is more spec.
func realNodeChainerJob(name, extra, masterCommand, workerCommand string) string {
	return fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: ChainerJob
metadata: {name: %s}
spec:
  backend: mpi
%s  master:
    template:
      spec:
%s  workerSets:
    ws0:
      replicas: 1
      template:
        spec:
%s`, name, extra, realNodePod(8, "chainer", masterCommand), realNodePod(10, "chainer", workerCommand))
}

// pinned is the part of a pod spec that puts a job's pod on the real node (its label and
// taint), lets it go at once when deleted (a shell as PID 1 ignores SIGTERM), and states the
// image's user (troupe-mpi's mpiuser) in runAsUser, as docs/mpi.md asks of SSH jobs so that the
// operator can make the job's keys readable to it; indented for a template's spec.
func pinned(indent int) string {
	p := strings.Repeat(" ", indent)
	return fmt.Sprintf("%[1]sterminationGracePeriodSeconds: 1\n%[1]snodeSelector: {%[2]s: \"true\"}\n"+
		"%[1]stolerations: [{key: %[2]s, operator: Exists, effect: NoSchedule}]\n"+
		"%[1]ssecurityContext: {runAsUser: 1000, runAsGroup: 1000}\n", p, nodeLabel)
}

// waitCondition waits for a troupe job's condition (Succeeded or Failed) to be True and
// returns how long it took.
func waitCondition(t *testing.T, ns, resource, cond string, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	out, err := kubectl("", "wait", "-n", ns, resource, "--for=condition="+cond, fmt.Sprintf("--timeout=%ds", int(timeout.Seconds())))
	if err != nil {
		return time.Since(start), fmt.Errorf("%w: %s", err, out)
	}
	return time.Since(start), nil
}

// describeOnFailure logs what a user would look at when a job did not end as expected.
func describeOnFailure(t *testing.T, ns string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out, _ := kubectl("", "get", "-n", ns, "all,chainerjobs.troupe.dev,mpijobs.troupe.dev", "-o", "wide")
		t.Logf("objects:\n%s", out)
		out, _ = kubectl("", "get", "-n", ns, "chainerjobs.troupe.dev,mpijobs.troupe.dev", "-o", "yaml")
		t.Logf("jobs:\n%s", out)
		out, _ = kubectl("", "get", "events", "-n", ns, "--sort-by=.lastTimestamp")
		t.Logf("events:\n%s", out)
	})
}
