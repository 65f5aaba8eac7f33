package realnode

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// ddpArgs keep a DDP training to seconds, as trainArgs do train.py's.
var ddpArgs = []string{"python3", "/opt/troupe/ddp.py", "--epochs", "30", "--batch-size", "16"}

var (
	ddpRankLine  = regexp.MustCompile(`(?m)^rank (\d+) of (\d+) on host (\S+) \(restart (\d+)\)$`)
	ddpEpochLine = regexp.MustCompile(`(?m)^epoch (\d+) loss ([0-9.]+) world size (\d+)$`)
	ddpWorld     = regexp.MustCompile(`(?m)^final world size (\d+)$`)
)

// pytorchExample is one of examples/ (a PyTorchJob) with its pods put on the real node and
// their command set to cmd, as YAML for kubectl.
func pytorchExample(t *testing.T, file string, cmd []string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	var pin map[string]any
	if err := yaml.Unmarshal([]byte(pinned(0)), &pin); err != nil {
		t.Fatal(err)
	}
	for _, replica := range obj["spec"].(map[string]any)["pytorchReplicaSpecs"].(map[string]any) {
		pod := replica.(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		for k, v := range pin {
			pod[k] = v
		}
		for _, c := range pod["containers"].([]any) {
			c := c.(map[string]any)
			c["image"] = trainImage
			var args []any
			for _, a := range cmd {
				args = append(args, a)
			}
			c["command"] = args
			// Three pods of one CPU each do not fit the two-CPU node: a fraction each.
			c["resources"] = map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "256Mi"},
				"limits": map[string]any{"cpu": "600m", "memory": "1Gi"}}
		}
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// checkDDP checks a DDP run's rank 0 log and the other ranks' (logs by pod): every rank of one
// world of want ranks, each on its own host, the loss falling, a test accuracy of at least 0.9,
// every rank ending with rank 0's weights. It logs the lines a user reads.
func checkDDP(t *testing.T, logs map[string]string, want int) {
	t.Helper()
	hosts := map[string]int{}
	var all, summary []string
	for pod, l := range logs {
		all = append(all, l)
		for _, m := range ddpRankLine.FindAllStringSubmatch(l, -1) {
			if size, _ := strconv.Atoi(m[2]); size == want {
				rank, _ := strconv.Atoi(m[1])
				hosts[m[3]] = rank
				summary = append(summary, pod+": "+m[0])
			}
		}
	}
	joined := strings.Join(all, "\n")
	if len(hosts) != want {
		t.Errorf("%d hosts ran ranks of a world of %d, want %d: %v", len(hosts), want, want, hosts)
	}
	epochs := ddpEpochLine.FindAllStringSubmatch(joined, -1)
	if len(epochs) < 2 {
		t.Fatalf("%d epoch lines, want several:\n%s", len(epochs), joined)
	}
	first, _ := strconv.ParseFloat(epochs[0][2], 64)
	last, _ := strconv.ParseFloat(epochs[len(epochs)-1][2], 64)
	if !(last < first) {
		t.Errorf("the loss did not fall: %s, then %s", epochs[0][0], epochs[len(epochs)-1][0])
	}
	acc := accuracyLine.FindStringSubmatch(joined)
	if acc == nil {
		t.Fatalf("no test accuracy in the logs:\n%s", joined)
	}
	if a, _ := strconv.ParseFloat(acc[1], 64); a < 0.9 {
		t.Errorf("test accuracy %.4f, want at least 0.9", a)
	}
	if w := ddpWorld.FindStringSubmatch(joined); w == nil || w[1] != strconv.Itoa(want) {
		t.Errorf("final world size %v, want %d", w, want)
	}
	agree := fmt.Sprintf("all %d ranks agree on the final weights", want)
	if !strings.Contains(joined, agree) {
		t.Errorf("the logs lack %q", agree)
	}
	summary = append(summary, epochs[0][0], epochs[len(epochs)-1][0], acc[0])
	t.Logf("training output:\n%s", strings.Join(summary, "\n"))
}

// podLogs is the log of every pod of a job, by pod, read as users read a job's logs: one
// kubectl logs over the label every pod of a troupe job carries, each line prefixed with its pod.
func podLogs(t *testing.T, ns, job string) map[string]string {
	t.Helper()
	// A pod that has not started yet fails its part of the command; the others are read.
	all, _ := kubectl("", "logs", "-n", ns, "-l", "troupe.dev/job-name="+job, "-c", "pytorch",
		"--prefix", "--tail=-1", "--max-log-requests=20")
	out := map[string]string{}
	for _, line := range strings.Split(all, "\n") {
		// [pod/NAME/pytorch] text
		rest, ok := strings.CutPrefix(line, "[pod/")
		if !ok {
			continue
		}
		pod, text, ok := strings.Cut(rest, "/pytorch] ")
		if !ok {
			continue
		}
		out[pod] += text + "\n"
	}
	return out
}

// TestPyTorchDDP: examples/pytorchjob.yaml (a Master and two Workers, as kubeflow's PyTorchJob
// is written) with the troupe-train image on the real node: ddp.py joins the three pods with
// torch.distributed's env:// from the environment troupe gives them, trains DistributedDataParallel
// over gloo to an accuracy of at least 0.9, and the job succeeds with its master.
func TestPyTorchDDP(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	needOperator(t)
	needTrainImage(t)
	ns := namespace(t, "realnode-pytorch")
	describeOnFailure(t, ns)
	mustKubectl(t, pytorchExample(t, "pytorchjob.yaml", ddpArgs), "apply", "-n", ns, "-f", "-")
	took, err := waitCondition(t, ns, "pytorchjob.troupe.dev/pytorch-digits", "Succeeded", 5*time.Minute)
	logs := podLogs(t, ns, "pytorch-digits")
	if err != nil {
		t.Fatalf("the job did not succeed: %v\nlogs: %v", err, logs)
	}
	t.Logf("pytorch-digits Succeeded %.0fs after it was created", took.Seconds())
	checkDDP(t, logs, 3)
}

// TestPyTorchElasticScale: examples/pytorchjob-elastic.yaml (Workers alone, torch elastic with
// a c10d rendezvous, 2 to 3 workers) on the real node, scaled from 2 to 3 workers with kubectl
// scale while it trains: the new worker's Job joins the rendezvous, torchrun restarts the group
// with world size 3, and the job succeeds once every worker has, training ended with 3 ranks.
func TestPyTorchElasticScale(t *testing.T) {
	t.Parallel()         // beside the other job tests, after the install tests (suite_test.go)
	testutil.LongOnly(t) // e2e's TestPyTorchJobElasticScale walks the operator's side of a scale
	needOperator(t)
	needTrainImage(t)
	ns := namespace(t, "realnode-elastic")
	describeOnFailure(t, ns)
	cmd := append([]string{"python3", "/opt/troupe/torchrun"}, ddpArgs[1:]...)
	cmd = append(cmd, "--epoch-seconds", "1")
	mustKubectl(t, pytorchExample(t, "pytorchjob-elastic.yaml", cmd), "apply", "-n", ns, "-f", "-")
	start := time.Now()
	// Training with 2 ranks: rank 0's log (whichever worker has it) says so.
	deadline := time.Now().Add(4 * time.Minute)
	for !strings.Contains(strings.Join(slices.Collect(maps.Values(podLogs(t, ns, "pytorch-elastic"))), "\n"), "world size 2") {
		if time.Now().After(deadline) {
			previous, _ := kubectl("", "logs", "-n", ns, "-l", "pytorchjob.troupe.dev/name=pytorch-elastic", "-c", "pytorch", "--previous", "--tail=40")
			t.Fatalf("no epoch with world size 2 in 4 minutes: %v\nthe containers that ended before:\n%s", podLogs(t, ns, "pytorch-elastic"), previous)
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("training with 2 workers %.0fs after the create; scaling to 3", time.Since(start).Seconds())
	mustKubectl(t, "", "scale", "-n", ns, "pytorchjob/pytorch-elastic", "--replicas=3")
	took, err := waitCondition(t, ns, "pytorchjob.troupe.dev/pytorch-elastic", "Succeeded", 6*time.Minute)
	logs := podLogs(t, ns, "pytorch-elastic")
	if err != nil {
		t.Fatalf("the job did not succeed: %v\nlogs: %v", err, logs)
	}
	t.Logf("pytorch-elastic Succeeded %.0fs after the scale", took.Seconds())
	checkDDP(t, logs, 3)
}
