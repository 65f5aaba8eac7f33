package realnode

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// autoscaleTarget is the CPU utilization (percent of the workers' request of 100m) the autoscaler
// of TestHPAScalesElasticPyTorch keeps the workers at: twice the request, which a worker waiting
// in its rendezvous or importing torch stays under, and one that trains (up to its limit of
// 600m) goes over.
const autoscaleTarget = 200

// hpaStatus is what the test reads of the job's HorizontalPodAutoscaler (autoscaling/v2).
type hpaStatus struct {
	Status struct {
		CurrentReplicas int32 `json:"currentReplicas"`
		DesiredReplicas int32 `json:"desiredReplicas"`
		CurrentMetrics  []struct {
			Resource *struct {
				Name    string `json:"name"`
				Current struct {
					AverageUtilization *int32 `json:"averageUtilization"`
					AverageValue       string `json:"averageValue"`
				} `json:"current"`
			} `json:"resource"`
		} `json:"currentMetrics"`
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"conditions"`
	} `json:"status"`
}

// cpuUtilization is the CPU utilization the autoscaler last read, if it read one.
func (h hpaStatus) cpuUtilization() (int32, string, bool) {
	for _, m := range h.Status.CurrentMetrics {
		if m.Resource != nil && m.Resource.Name == "cpu" && m.Resource.Current.AverageUtilization != nil {
			return *m.Resource.Current.AverageUtilization, m.Resource.Current.AverageValue, true
		}
	}
	return 0, "", false
}

// autoscaledJob is examples/pytorchjob-elastic.yaml made autoscaled: one worker to start with,
// elastic between 1 and 2, and elasticPolicy.metrics asking for CPU utilization at
// autoscaleTarget; its pods on the real node running cmd.
func autoscaledJob(t *testing.T, name string, cmd []string) string {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(pytorchExample(t, "pytorchjob-elastic.yaml", cmd)), &obj); err != nil {
		t.Fatal(err)
	}
	obj["metadata"].(map[string]any)["name"] = name
	spec := obj["spec"].(map[string]any)
	policy := spec["elasticPolicy"].(map[string]any)
	policy["minReplicas"] = 1
	policy["maxReplicas"] = 2
	policy["metrics"] = []any{map[string]any{
		"type": "Resource",
		"resource": map[string]any{
			"name":   "cpu",
			"target": map[string]any{"type": "Utilization", "averageUtilization": autoscaleTarget},
		},
	}}
	spec["pytorchReplicaSpecs"].(map[string]any)["Worker"].(map[string]any)["replicas"] = 1
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestHPAScalesElasticPyTorch: an elastic PyTorchJob with elasticPolicy.metrics (CPU
// utilization, 1 to 2 workers) training on the real node, its CPU measured by the cluster's real
// metrics pipeline (the kubelet's /metrics/resource, scraped by metrics-server, served as
// metrics.k8s.io to kube-controller-manager's HPA controller; CLUSTER_ADDONS=metrics). Nobody
// scales the job: the autoscaler troupe created reads the one worker's utilization above its
// target and sets the job's worker count to 2 through the scale subresource; troupe adds the
// second worker's Job, its pod runs, and torchrun re-forms the group with world size 2.
func TestHPAScalesElasticPyTorch(t *testing.T) {
	t.Parallel() // beside the other job tests, after the install tests (suite_test.go)
	if os.Getenv("TROUPE_REALNODE_METRICS") != "1" {
		t.Skip("needs the cluster's metrics-server: make test-autoscale")
	}
	needOperator(t)
	needTrainImage(t)
	needNodeMetrics(t)
	ns := namespace(t, "realnode-autoscale")
	describeOnFailure(t, ns)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kubectl("", "describe", "hpa", "-n", ns)
			t.Logf("autoscaler:\n%s", out)
			out, _ = kubectl("", "get", "pytorchjobs.troupe.dev", "-n", ns, "-o", "yaml")
			t.Logf("job:\n%s", out)
		}
	})
	const job = "pytorch-autoscale"
	// Train without pause for longer than the test runs: the worker burns its CPU limit.
	cmd := []string{"python3", "/opt/troupe/torchrun", "/opt/troupe/ddp.py", "--epochs", "100000", "--batch-size", "16"}
	mustKubectl(t, autoscaledJob(t, job, cmd), "apply", "-n", ns, "-f", "-")
	start := time.Now()
	since := func() float64 { return time.Since(start).Seconds() }

	var (
		firstMetric, world1, scaled, running, world2 time.Duration
		firstUtil, scaleUtil                         int32
		firstValue                                   string
		hpa                                          hpaStatus
	)
	deadline := start.Add(150 * time.Second)
	for world2 == 0 {
		if time.Now().After(deadline) {
			out, _ := kubectl("", "get", "hpa,pods", "-n", ns, "-o", "wide")
			top, _ := kubectl("", "top", "pods", "-n", ns)
			t.Fatalf("after %.0fs: first metric at %v (%d%%), one worker training at %v, scaled at %v, second worker Running at %v, world size 2 at %v\n%s\nkubectl top pods:\n%s",
				since(), firstMetric, firstUtil, world1, scaled, running, world2, out, top)
		}
		// Rank 0's log first: a training seen in the same round as the scale came before it.
		if world1 == 0 || running != 0 {
			logs := strings.Join(slices.Collect(maps.Values(podLogs(t, ns, job))), "\n")
			if world1 == 0 && strings.Contains(logs, "world size 1") {
				world1 = time.Since(start)
				t.Logf("%.0fs: one worker trains (world size 1)", since())
			}
			if running != 0 && strings.Contains(logs, "world size 2") {
				world2 = time.Since(start)
				t.Logf("%.0fs: the training goes on with world size 2", since())
			}
		}
		out, err := kubectl("", "get", "hpa", job, "-n", ns, "-o", "json")
		if err == nil {
			hpa = hpaStatus{}
			if err := json.Unmarshal([]byte(out), &hpa); err != nil {
				t.Fatalf("the autoscaler: %v\n%s", err, out)
			}
			if util, value, ok := hpa.cpuUtilization(); ok {
				if firstMetric == 0 {
					firstMetric, firstUtil, firstValue = time.Since(start), util, value
					t.Logf("%.0fs: the autoscaler reads the workers' CPU: %d%% of the request (%s per pod), target %d%%",
						since(), util, value, autoscaleTarget)
				}
				if scaled == 0 {
					scaleUtil = util
				}
			}
		}
		if scaled == 0 {
			replicas, _ := kubectl("", "get", "pytorchjob.troupe.dev/"+job, "-n", ns, "-o", "jsonpath={.spec.pytorchReplicaSpecs.Worker.replicas}")
			if strings.TrimSpace(replicas) == "2" {
				scaled = time.Since(start)
				t.Logf("%.0fs: the job's workers set to 2 (the autoscaler's last reading before: %d%%)", since(), scaleUtil)
				out, _ := kubectl("", "get", "hpa", job, "-n", ns)
				t.Logf("kubectl get hpa:\n%s", out)
			}
		}
		if scaled != 0 && running == 0 {
			phase, _ := kubectl("", "get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name="+job+"-worker-1",
				"-o", "jsonpath={.items[*].status.phase}")
			if strings.Contains(phase, "Running") {
				running = time.Since(start)
				t.Logf("%.0fs: the second worker's pod is Running", since())
				top, _ := kubectl("", "top", "pods", "-n", ns)
				t.Logf("kubectl top pods:\n%s", top)
			}
		}
		time.Sleep(time.Second)
	}

	// The scale was the autoscaler's, for the CPU it measured: its rescale event says so, and its
	// reading before the scale was above the target.
	events := mustKubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=HorizontalPodAutoscaler,reason=SuccessfulRescale",
		"-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
	if !strings.Contains(events, "New size: 2; reason: cpu resource utilization (percentage of request) above target") {
		t.Errorf("no rescale of the autoscaler for CPU above its target; its events:\n%s", events)
	}
	if scaleUtil <= autoscaleTarget {
		t.Errorf("the autoscaler's reading before the scale was %d%%, not above its target %d%%", scaleUtil, autoscaleTarget)
	}
	if world1 == 0 || world1 > scaled {
		t.Errorf("the job was scaled at %v, before its one worker trained (world size 1 at %v)", scaled, world1)
	}
	t.Logf("from the create: first CPU reading %.0fs (%d%%, %s per pod), one worker training %.0fs, workers 1 -> 2 at %.0fs (%d%%), second worker Running %.0fs, world size 2 %.0fs; %s",
		firstMetric.Seconds(), firstUtil, firstValue, world1.Seconds(), scaled.Seconds(), scaleUtil, running.Seconds(), world2.Seconds(), strings.TrimSpace(events))
}

// needNodeMetrics waits until the resource metrics API (metrics-server, CLUSTER_ADDONS=metrics)
// has the real node's usage, as kubectl top shows it: metrics-server needs two scrapes of the
// kubelet to compute a rate.
func needNodeMetrics(t *testing.T) {
	t.Helper()
	node, err := kubectl("", "get", "nodes", "-l", nodeLabel+"=true", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil || strings.TrimSpace(node) == "" {
		t.Fatalf("the real node: %v %q", err, node)
	}
	start := time.Now()
	for {
		out, err := kubectl("", "top", "node", strings.TrimSpace(node))
		if err == nil {
			t.Logf("the resource metrics API has the real node after %.0fs:\n%s", time.Since(start).Seconds(), out)
			return
		}
		if time.Since(start) > 90*time.Second {
			status, _ := kubectl("", "get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "jsonpath={.status.conditions}")
			t.Fatalf("no metrics of the real node %s after 90s: %v\n%s\nAPIService: %s\n(see the cluster's logs/metrics-server.log)", node, err, out, status)
		}
		time.Sleep(time.Second)
	}
}
