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
// exits 3 the first time it runs (a marker in its worker pod's /tmp, which outlives the
// launcher), and mpirun with it. The launcher prints when it starts, rank 1 when it crashes (in
// nanoseconds since the epoch), so that the restart's cost is read from the logs.
const crashOnceLauncher = `echo "launcher starts $(date +%s%N)"
exec mpirun -n 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ] && [ ! -e /tmp/crashed ]; then touch /tmp/crashed; echo "rank 1 crashes $(date +%s%N)"; exit 3; fi; exec /home/mpiuser/pi'`

var (
	launcherStarts = regexp.MustCompile(`launcher starts (\d+)`)
	rankCrashes    = regexp.MustCompile(`rank 1 crashes (\d+)`)
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

// nanos reads the first match of re in s as a time of nanoseconds since the epoch.
func nanos(t *testing.T, re *regexp.Regexp, s, what string) time.Time {
	t.Helper()
	m := re.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %q in the %s log:\n%s", re, what, s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
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
			var first string
			if tt.launcherPods == 1 {
				// The first run's log, read once its container restarted and while the second
				// runs: the kubelet removes a completed pod's earlier containers.
				waitJSONPath(t, ns, "mpijob/pi", "{.status.phase}", "Running", 2*time.Minute)
				launcher := strings.TrimSpace(mustKubectl(t, "", "get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=pi-launcher", "-o", "name"))
				waitJSONPath(t, ns, launcher, "{.status.containerStatuses[0].restartCount}", "1", 2*time.Minute)
				first = mustKubectl(t, "", "logs", "-n", ns, launcher, "-c", "mpi-launcher", "--previous")
			}
			if _, err := waitCondition(t, ns, "mpijob/pi", "Succeeded", 4*time.Minute); err != nil {
				t.Fatalf("the job did not succeed: %v", err)
			}
			launchers := strings.Fields(mustKubectl(t, "", "get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=pi-launcher",
				"--sort-by=.metadata.creationTimestamp", "-o", "jsonpath={.items[*].metadata.name}"))
			if len(launchers) != tt.launcherPods {
				t.Fatalf("launcher pods %v, want %d", launchers, tt.launcherPods)
			}
			var last string
			if tt.launcherPods == 1 {
				last = mustKubectl(t, "", "logs", "-n", ns, launchers[0], "-c", "mpi-launcher")
				rc := mustKubectl(t, "", "get", "pod", "-n", ns, launchers[0], "-o", "jsonpath={.status.containerStatuses[0].restartCount}")
				if rc != "1" {
					t.Errorf("launcher container restarted %s times, want once, in place", rc)
				}
				rules := mustKubectl(t, "", "get", "job", "-n", ns, "pi-launcher", "-o", "jsonpath={.spec.template.spec.containers[0].restartPolicyRules}")
				t.Logf("the launcher Job's container restart rules: %s", rules)
			} else {
				first = mustKubectl(t, "", "logs", "-n", ns, launchers[0], "-c", "mpi-launcher")
				last = mustKubectl(t, "", "logs", "-n", ns, launchers[1], "-c", "mpi-launcher")
			}
			if restarts := mustKubectl(t, "", "get", "mpijob", "-n", ns, "pi", "-o", "jsonpath={.status.restarts}"); restarts != "" && restarts != "0" {
				t.Errorf("restarts %q: the job was restarted as a whole", restarts)
			}
			if !strings.Contains(last, "pi is approximately") {
				t.Errorf("the last launcher printed no pi:\n%s", last)
			}
			started, crashed, again := nanos(t, launcherStarts, first, "first launcher's"), nanos(t, rankCrashes, first, "first launcher's"),
				nanos(t, launcherStarts, last, "last launcher's")
			t.Logf("%s: the launcher started %.1fs after the create; rank 1 crashed %.1fs later; the next launcher started %.1fs after the crash",
				tt.name, started.Sub(created).Seconds(), crashed.Sub(started).Seconds(), again.Sub(crashed).Seconds())
		})
	}
}
