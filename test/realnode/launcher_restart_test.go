package realnode

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// crashOnceLauncher is the launcher of kubeflow's pi.yaml made to lose a rank once: rank 1
// exits 3 the first time it runs, and mpirun with it. Rank 1 keeps when the first launcher
// started and when it crashed (nanoseconds since the epoch) in a marker in its worker pod's
// /tmp, which outlives the launcher, and prints them when it runs again; so the last launcher's
// log holds the whole story. The first run's own log is no witness: once the last run ends,
// the kubelet may remove the first container, its log and termination message with it.
const crashOnceLauncher = `export STARTED=$(date +%s%N); echo "launcher starts $STARTED"
exec mpirun -n 2 -x STARTED sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
  if [ ! -e /tmp/crashed ]; then echo "first run: launcher started $STARTED, rank 1 crashed $(date +%s%N)" > /tmp/crashed; exit 3; fi
  cat /tmp/crashed
fi
exec /home/mpiuser/pi'`

var (
	lastStart = regexp.MustCompile(`(?m)^launcher starts (\d+)`)
	firstRun  = regexp.MustCompile(`first run: launcher started (\d+), rank 1 crashed (\d+)`)
)

// crashOncePi is kubeflow's pi.yaml (troupe.dev, 500m a pod: the node has 2 CPUs) with the
// launcher of crashOnceLauncher, its restartPolicy as given, backoffLimit 2, and a rule that
// fails the job on the launcher's exit code 42 (which it never exits with).
func crashOncePi(t *testing.T, launcherRestart string) string {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(kubeflowPi(t, "pi.yaml", "500m")), &obj); err != nil {
		t.Fatal(err)
	}
	spec := obj["spec"].(map[string]any)
	run := spec["runPolicy"].(map[string]any)
	run["backoffLimit"] = 2
	delete(run, "ttlSecondsAfterFinished")
	run["failurePolicy"] = map[string]any{"maxRestarts": 0, "rules": []any{map[string]any{
		"name": "bug", "action": "FailJob", "onReplicas": []any{"launcher"}, "onExitCodes": map[string]any{"values": []any{42}},
	}}}
	launcher := spec["mpiReplicaSpecs"].(map[string]any)["Launcher"].(map[string]any)
	launcher["restartPolicy"] = launcherRestart
	c := launcher["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	c["command"] = []any{"sh", "-c", crashOnceLauncher}
	delete(c, "args")
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// nanos reads match i of the first match of re in the last launcher's log as a time of
// nanoseconds since the epoch.
func nanos(t *testing.T, re *regexp.Regexp, i int, log string) time.Time {
	t.Helper()
	m := re.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no %q in the last launcher's log:\n%s", re, log)
	}
	n, err := strconv.ParseInt(m[i], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, n)
}

// TestLauncherRestartsInPlace (issue 51): kubeflow's pi MPIJob, its launcher OnFailure as
// kubeflow writes it, with a rule on the launcher's exit code 42, loses a rank once. On
// Kubernetes 1.35 (container restart rules on) the launcher's container restarts in place:
// one launcher pod, restarted once, the same workers, no whole-job restart, Succeeded, where a
// launcher of restartPolicy Never (what every master under such a rule ran before, and runs on
// clusters without container restart rules) takes a new pod. The cost of each, from rank 1's
// crash to the next launcher's start, is logged beside the fresh start's.
func TestLauncherRestartsInPlace(t *testing.T) {
	// Not side by side: kubeflow's pi pods ask for whole CPUs of the real node (suite_test.go).
	needOperator(t)
	realNodeOnly(t) // kubeflow's example selects no node: it must land on the real one
	needKubeflowImages(t)
	for _, tt := range []struct {
		name, restartPolicy string
		launcherPods        int
	}{
		{"in place", "OnFailure", 1},
		{"new pod", "Never", 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := namespace(t, "realnode-launcher-"+strings.ReplaceAll(tt.name, " ", "-"))
			describeOnFailure(t, ns)
			created := time.Now()
			mustKubectl(t, crashOncePi(t, tt.restartPolicy), "apply", "-n", ns, "-f", "-")
			if _, err := waitCondition(t, ns, "mpijob/pi", "Succeeded", 4*time.Minute); err != nil {
				t.Fatalf("the job did not succeed: %v", err)
			}
			launchers := strings.Fields(mustKubectl(t, "", "get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=pi-launcher",
				"--sort-by=.metadata.creationTimestamp", "-o", "jsonpath={.items[*].metadata.name}"))
			if len(launchers) != tt.launcherPods {
				t.Fatalf("launcher pods %v, want %d", launchers, tt.launcherPods)
			}
			last := mustKubectl(t, "", "logs", "-n", ns, launchers[len(launchers)-1], "-c", "mpi-launcher")
			if tt.launcherPods == 1 {
				rc := mustKubectl(t, "", "get", "pod", "-n", ns, launchers[0], "-o", "jsonpath={.status.containerStatuses[0].restartCount}")
				if rc != "1" {
					t.Errorf("launcher container restarted %s times, want once, in place", rc)
				}
				rules := mustKubectl(t, "", "get", "job", "-n", ns, "pi-launcher", "-o", "jsonpath={.spec.template.spec.containers[0].restartPolicyRules}")
				t.Logf("the launcher Job's container restart rules: %s", rules)
			}
			if restarts := mustKubectl(t, "", "get", "mpijob", "-n", ns, "pi", "-o", "jsonpath={.status.restarts}"); restarts != "" && restarts != "0" {
				t.Errorf("restarts %q: the job was restarted as a whole", restarts)
			}
			if !strings.Contains(last, "pi is approximately") {
				t.Errorf("the last launcher printed no pi:\n%s", last)
			}
			started, crashed, again := nanos(t, firstRun, 1, last), nanos(t, firstRun, 2, last), nanos(t, lastStart, 1, last)
			t.Logf("%s: the launcher started %.1fs after the create; rank 1 crashed %.1fs later; the next launcher started %.1fs after the crash",
				tt.name, started.Sub(created).Seconds(), crashed.Sub(started).Seconds(), again.Sub(crashed).Seconds())
		})
	}
}
