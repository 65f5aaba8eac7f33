package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
	"github.com/troupe-dev/troupe/pkg/version"
	"github.com/troupe-dev/troupe/test/doccommands"
)

// The install as users run it: the operator image of make images in pods on the real node.
const (
	operatorNS     = "troupe-system"
	operatorDeploy = "deployment/troupe-operator"
	// simulatedTaint keeps pods off the kwok nodes while troupe is installed, so that the
	// operator's pods (which select no node, as on a user's cluster) run on the real node.
	simulatedTaint = "troupe.dev/install-test=simulated:NoSchedule"
)

// operatorImage is the operator image of this checkout's version, as make images names it.
var operatorImage = "ghcr.io/troupe-dev/troupe-operator:" + version.Version

// TestInstall installs troupe from the repository each way the docs write, with the docs'
// commands as written (test/doccommands): kustomize (config/), the rendered deploy/ with each of
// its two commands, Helm's chart and the namespace-scoped kustomize install (config/namespaced/).
// It checks each install the same way: two replicas of the operator image run on the real
// node in a namespace that enforces the restricted Pod Security Standard, both Ready (one
// leads), behind a PodDisruptionBudget, and the webhooks answer through their Service. Each
// install ends with the docs' uninstall of its form, after which nothing of troupe may be left.
// With the first install, the operator is restarted (kubectl rollout restart) while a job runs
// on the real node: the rollout finishes and the job Succeeds with one launcher pod.
func TestInstall(t *testing.T) {
	// The operator the job tests run as a local process would answer beside the installed one
	// (and its webhook configuration is the installs'): stop it; the next job test restarts it.
	stopOperator()
	realNodeOnly(t)
	var none doccommands.Values // the checkout's commands have no placeholder
	t.Run("kustomize", func(t *testing.T) {
		runDocs(t, repoRoot, doccommands.Kustomize, doccommands.Install, none)
		t.Cleanup(func() { uninstallWithDocs(t, repoRoot, doccommands.Kustomize, none) })
		checkInstall(t)
		checkRolloutDuringJob(t)
	})
	// deploy/ is the directory chainer-operator's README and ours hand to kubectl: every file
	// in it must be an object kubectl creates, or the command exits 1 after creating the rest.
	// Its two install commands are alternatives: one install each.
	for i, install := range docs(t, doccommands.Deploy, doccommands.Install, none) {
		t.Run(fmt.Sprintf("deploy-%d", i), func(t *testing.T) {
			testutil.LongOnly(t) // the same objects as kustomize's and the release's troupe.yaml
			runDoc(t, repoRoot, install)
			t.Cleanup(func() { uninstallWithDocs(t, repoRoot, doccommands.Deploy, none) })
			checkInstall(t)
		})
	}
	t.Run("helm", func(t *testing.T) {
		helm := os.Getenv("HELM")
		if helm == "" {
			t.Fatal("HELM is not set: run with make test-realnode")
		}
		// The chart installs the CRDs (its crds/) and leaves the namespace to the user, who
		// makes it and labels it for Pod Security (README's install section).
		t.Cleanup(func() { uninstallWithDocs(t, repoRoot, doccommands.Helm, none) })
		for _, c := range docs(t, doccommands.Helm, doccommands.PrepareNamespace, none) {
			runDoc(t, repoRoot, c)
			if !strings.HasPrefix(c.Text, "kubectl create namespace ") {
				continue
			}
			// Installed into a namespace without the label, the chart's notes say so and how
			// to label it (a dry run on the server, where the chart can look the namespace up).
			notes, err := exec.Command(helm, "install", "troupe", filepath.Join(repoRoot, "charts", "troupe"),
				"--kubeconfig", kubeconfig, "--namespace", operatorNS, "--dry-run=server").CombinedOutput()
			if err != nil || !strings.Contains(string(notes), "WARNING: namespace "+operatorNS+" does not enforce the restricted Pod Security Standard") {
				t.Errorf("helm install --dry-run=server into an unlabelled namespace: %v; want the notes to warn\n%s", err, notes)
			}
		}
		var out string
		for _, c := range docs(t, doccommands.Helm, doccommands.Install, none) {
			out += runDoc(t, repoRoot, c)
		}
		if !strings.Contains(out, "enforces the restricted Pod Security Standard") {
			t.Errorf("helm install into the labelled namespace: the notes do not confirm the label\n%s", out)
		}
		chartCRDs, _ := filepath.Glob(filepath.Join(repoRoot, "charts", "troupe", "crds", "troupe.dev_*.yaml"))
		for _, f := range chartCRDs { // troupe.dev_<plural>.yaml: the CRD <plural>.troupe.dev
			plural := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "troupe.dev_"), ".yaml")
			mustKubectl(t, "", "get", "crd", plural+".troupe.dev")
		}
		release := mustKubectl(t, "", "get", "secret", "-n", operatorNS, "sh.helm.release.v1.troupe.v1", "-o", "jsonpath={.data.release}")
		t.Logf("Helm's release Secret holds %d bytes of its 1 MiB limit", len(release))
		checkInstall(t)
	})
	t.Run("namespaced", func(t *testing.T) {
		testutil.LongOnly(t) // TestInstallFromRelease/namespaced installs the same, checked the same
		t.Cleanup(func() { uninstallWithDocs(t, repoRoot, doccommands.Namespaced, none) })
		runDocs(t, repoRoot, doccommands.Namespaced, doccommands.PrepareNamespace, none)
		runDocs(t, repoRoot, doccommands.Namespaced, doccommands.Install, none)
		checkInstall(t)
		checkWatchesOnly(t, "troupe-jobs")
	})
}

// checkWatchesOnly: the namespace-scoped operator is told to watch only ns (its argument) and
// may read jobs there but not elsewhere (its ServiceAccount's rights).
func checkWatchesOnly(t *testing.T, ns string) {
	t.Helper()
	args := mustKubectl(t, "", "get", "deployment", "-n", operatorNS, "troupe-operator", "-o", "jsonpath={.spec.template.spec.containers[0].args}")
	if !strings.Contains(args, "--watch-namespaces="+ns) {
		t.Errorf("the namespace-scoped operator's arguments %s lack --watch-namespaces=%s", args, ns)
	}
	sa := "system:serviceaccount:" + operatorNS + ":troupe-operator"
	if out, _ := kubectl("", "auth", "can-i", "list", "mpijobs.troupe.dev", "-n", ns, "--as", sa); strings.TrimSpace(out) != "yes" {
		t.Errorf("the namespace-scoped operator may not list MPIJobs in %s: %s", ns, out)
	}
	if out, _ := kubectl("", "auth", "can-i", "list", "mpijobs.troupe.dev", "-n", "default", "--as", sa); strings.TrimSpace(out) != "no" {
		t.Errorf("the namespace-scoped operator may list MPIJobs in default: %s", out)
	}
}

// realNodeOnly taints the kwok nodes and lifts the real node's taint for the test, so that
// pods which select no node run on the real node, as on a cluster of real nodes.
func realNodeOnly(t *testing.T) {
	real := strings.TrimSpace(mustKubectl(t, "", "get", "nodes", "-l", nodeLabel+"=true", "-o", "jsonpath={.items[0].metadata.name}"))
	mustKubectl(t, "", "taint", "nodes", "-l", nodeLabel+"!=true", simulatedTaint)
	mustKubectl(t, "", "taint", "node", real, nodeLabel+"=true:NoSchedule-")
	t.Cleanup(func() {
		mustKubectl(t, "", "taint", "node", real, nodeLabel+"=true:NoSchedule")
		mustKubectl(t, "", "taint", "nodes", "-l", nodeLabel+"!=true", simulatedTaint+"-")
	})
}

// checkInstall checks an install of this checkout that was just made, and that its operator's
// Go runtime collects against the container's memory limit less 64 MiB (the limit from the
// manifests, the rule from the operator's setMemoryLimit).
func checkInstall(t *testing.T) {
	t.Helper()
	checkInstallOf(t, operatorImage)
	limit := mustKubectl(t, "", "get", "deployment", "-n", operatorNS, "troupe-operator", "-o",
		`jsonpath={.spec.template.spec.containers[0].resources.limits.memory}`)
	q, err := resource.ParseQuantity(limit)
	if err != nil {
		t.Fatalf("the operator's memory limit %q: %v", limit, err)
	}
	logs := mustKubectl(t, "", "logs", "-n", operatorNS, "deployment/troupe-operator", "--tail=-1")
	soft := q.Value() - 64<<20
	if q.Value() < 128<<20 {
		soft = q.Value() / 2
	}
	want := fmt.Sprintf(`"memoryLimit":%d`, soft)
	if !strings.Contains(logs, want) {
		t.Errorf("the operator's start log does not say %s (its container's limit %s):\n%s", want, limit, firstLines(logs, 5))
	}
}

// firstLines is the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// checkInstallOf checks an install that was just made, whose operator runs image. The webhook
// checks create jobs (dry runs) in the namespace default, which it opts in first, as a cluster
// admin would; an install of this release must refuse them in a namespace not opted in.
func checkInstallOf(t *testing.T, image string) {
	t.Helper()
	mustKubectl(t, "", "label", "namespace", "default", "troupe.dev/jobs=enabled", "--overwrite")
	start := time.Now()
	if out, err := kubectl("", "rollout", "status", "-n", operatorNS, operatorDeploy, "--timeout=240s"); err != nil {
		t.Fatalf("the operator Deployment did not become available: %v\n%s%s", err, out, operatorDiagnostics())
	}
	t.Logf("operator Deployment available %v after the install", time.Since(start).Round(time.Second))
	waitWebhookService(t)

	// Two Ready replicas, on the real node, of the image make images built. After a rolling
	// update the replaced pods may still be terminating: wait for them to go.
	var pods string
	_ = wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		pods = mustKubectl(t, "", "get", "pods", "-n", operatorNS, "-l", "app.kubernetes.io/name=troupe-operator", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.spec.containers[0].image} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		return strings.Count(pods, "\n") == 2, nil
	})
	real := strings.TrimSpace(mustKubectl(t, "", "get", "nodes", "-l", nodeLabel+"=true", "-o", "jsonpath={.items[0].metadata.name}"))
	lines := strings.Split(strings.TrimSpace(pods), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 operator pods, got:\n%s", pods)
	}
	var names []string
	for _, l := range lines {
		f := strings.Fields(l)
		names = append(names, f[0])
		if len(f) != 4 || f[1] != real || f[2] != image || f[3] != "True" {
			t.Errorf("operator pod %q: want on node %s, image %s, Ready True", l, real, image)
		}
	}
	// One of them leads; the other is Ready all the same (it serves the webhooks).
	// Right after a rolling update the Lease may be between holders: the replaced leader
	// released it (holder "") and a new replica takes it at its next try, within seconds.
	var holder string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(context.Context) (bool, error) {
		holder = mustKubectl(t, "", "get", "lease", "-n", operatorNS, "troupe-operator.troupe.dev", "-o", "jsonpath={.spec.holderIdentity}")
		return holder != "", nil
	})
	if err != nil || (!strings.HasPrefix(holder, names[0]+"_") && !strings.HasPrefix(holder, names[1]+"_")) {
		t.Errorf("the leader election Lease is held by %q, not by an operator pod %v", holder, names)
	}

	// The namespace enforces the restricted standard, which the operator's pods meet.
	if l := mustKubectl(t, "", "get", "namespace", operatorNS, "-o", `jsonpath={.metadata.labels.pod-security\.kubernetes\.io/enforce}`); l != "restricted" {
		t.Errorf("namespace %s: pod-security.kubernetes.io/enforce=%q, want restricted", operatorNS, l)
	}
	out, err := kubectl("", "run", "-n", operatorNS, "privileged", "--image", mpiImage, "--dry-run=server",
		"--overrides", `{"spec":{"containers":[{"name":"privileged","image":"`+mpiImage+`","securityContext":{"privileged":true}}]}}`)
	if err == nil || !strings.Contains(out, "violates PodSecurity") {
		t.Errorf("a privileged pod in %s was not refused by Pod Security: %v\n%s", operatorNS, err, out)
	}
	if mina := mustKubectl(t, "", "get", "pdb", "-n", operatorNS, "troupe-operator", "-o", "jsonpath={.spec.minAvailable}"); mina != "1" {
		t.Errorf("PodDisruptionBudget troupe-operator: minAvailable %q, want 1", mina)
	}
	checkWebhooks(t)
	if prev := os.Getenv("TROUPE_PREVIOUS_RELEASE"); prev == "" || !strings.HasSuffix(image, ":"+prev) {
		checkNamespaceOptIn(t)
	}
}

// checkNamespaceOptIn: the install refuses a job's create in a namespace not opted in
// (kube-public, which every cluster has and no test labels), naming the label and the command.
func checkNamespaceOptIn(t *testing.T) {
	t.Helper()
	out, err := kubectl(jobManifest("not-opted-in", "true"), "create", "--dry-run=server", "-n", "kube-public", "-f", "-")
	want := "kubectl label namespace kube-public troupe.dev/jobs=enabled"
	if err == nil || !strings.Contains(out, "troupe-job-namespaces") || !strings.Contains(out, want) {
		t.Errorf("a job's create in kube-public (not opted in): %v, want refused by troupe-job-namespaces saying %q\n%s", err, want, out)
	}
}

// waitWebhookService waits until the API server reaches the webhook Service. Ready pods are
// not enough right after an install: the Service (new, or recreated with a new cluster IP
// after the previous install's uninstall) is routed only once kube-proxy has programmed its
// endpoints, and until then calls fail with "connection refused", on any cluster.
func waitWebhookService(t *testing.T) {
	t.Helper()
	start := time.Now()
	for {
		out, err := kubectl(jobManifest("probe", "true"), "create", "--dry-run=server", "-n", "default", "-f", "-")
		if err == nil {
			t.Logf("webhook Service answering %v after the Deployment was available", time.Since(start).Round(time.Second))
			return
		}
		if !strings.Contains(out, "failed calling webhook") || time.Since(start) > 2*time.Minute {
			t.Fatalf("the webhook Service does not answer: %v\n%s%s", err, out, operatorDiagnostics())
		}
		time.Sleep(time.Second) // poll interval: the condition is checked again, not assumed
	}
}

// checkWebhooks: through the webhook Service, a bad spec is refused with its field path and
// good specs are admitted (several, so both replicas behind the Service answer some).
func checkWebhooks(t *testing.T) {
	t.Helper()
	svc := mustKubectl(t, "", "get", "validatingwebhookconfiguration", "troupe-validating-webhook-configuration",
		"-o", "jsonpath={.webhooks[0].clientConfig.service.namespace}/{.webhooks[0].clientConfig.service.name}")
	if svc != operatorNS+"/troupe-webhook-service" {
		t.Errorf("the validating webhooks call %q, want the Service %s/troupe-webhook-service", svc, operatorNS)
	}
	out, err := kubectl("", "create", "--dry-run=server", "-f", filepath.Join(repoRoot, "test", "testdata", "admission", "bad", "chainer-gpu-fraction.yaml"))
	// Only the validating webhook refuses this file (its header: refused-by: webhook); the
	// CRD's schema admits it.
	want := "spec.workerSets[ws0].template.spec.containers[0].resources.limits[nvidia.com/gpu]"
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("the bad spec was not refused by the webhook with %q: %v\n%s", want, err, out)
	} else {
		t.Logf("bad spec refused through the webhook Service:\n%s", out)
	}
	// The mutating webhook defaults the master's slots, which the manifest leaves out.
	for i := range 6 {
		out, err := kubectl(jobManifest(fmt.Sprintf("good-%d", i), "true"), "create", "--dry-run=server", "-n", "default", "-f", "-",
			"-o", "jsonpath={.spec.master.mpiConfig.slots}")
		if err != nil || out != "1" {
			t.Errorf("a good spec (try %d) was refused or not defaulted (master.mpiConfig.slots %q, want 1): %v", i, out, err)
		}
	}
}

// jobManifest is a ChainerJob on the real node of the troupe-mpi image: a master and one
// worker, the master running command on both through mpiexec (KubeExec: no sshd).
func jobManifest(name, command string) string {
	pod := func(cmd string) string {
		return fmt.Sprintf(`
        spec:
          terminationGracePeriodSeconds: 1
          nodeSelector: {%[1]s: "true"}
          tolerations: [{key: %[1]s, operator: Exists, effect: NoSchedule}]
          containers:
          - name: chainer
            image: %[2]s
            imagePullPolicy: IfNotPresent
            command: [sh, -c, %[3]q]`, nodeLabel, mpiImage, cmd)
	}
	mpiexec := "mpiexec -n 2 -N 1 --mca btl self,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 sh -c " +
		fmt.Sprintf("%q", command+"; hostname")
	return fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: ChainerJob
metadata: {name: %s}
spec:
  backend: mpi
  master:
    template:%s
  workerSets:
    ws0:
      replicas: 1
      template:%s
`, name, pod(mpiexec), pod("while true; do sleep 1 & wait; done"))
}

// soloJobManifest is a ChainerJob of backend none on the real node: its master alone runs
// command in a troupe-mpi container, and the job's outcome is that command's exit code.
func soloJobManifest(name, command string) string {
	return fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: ChainerJob
metadata: {name: %s}
spec:
  backend: none
  master:
    template:
      spec:
        terminationGracePeriodSeconds: 1
        nodeSelector: {%[2]s: "true"}
        tolerations: [{key: %[2]s, operator: Exists, effect: NoSchedule}]
        containers:
        - name: chainer
          image: %[3]s
          imagePullPolicy: IfNotPresent
          command: [sh, -c, %[4]q]
`, name, nodeLabel, mpiImage, command)
}

// checkRolloutDuringJob restarts the operator while a real job runs on the real node (a
// master alone, backend none: an mpiexec of sleep across master and worker over KubeExec did
// not finish on this machine when tried, and is left to the MPI training tests):
// the rollout finishes, the job Succeeds, and exactly one launcher pod ever existed for it
// (a kubectl watch over the whole test sees every pod).
func checkRolloutDuringJob(t *testing.T) {
	ns := namespace(t, "install-rollout")
	const job = "rollout"
	selector := "chainerjob.troupe.dev/name=" + job + ",troupe.dev/role=master"
	watch := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "pods", "-n", ns, "-l", selector,
		"--watch", "-o", "name")
	var seen strings.Builder
	watch.Stdout = &seen
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Process.Kill(); _ = watch.Wait() }()

	// The master runs until the test creates finishFile in it, after the rollout: the job spans
	// the rollout however long that takes, and ends as soon as it is done.
	mustKubectl(t, soloJobManifest(job, "until [ -e "+finishFile+" ]; do sleep 1; done; hostname"), "create", "-n", ns, "-f", "-")
	// kubectl wait -l fails at once while no pod matches: poll for the launcher to run.
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		out, err := kubectl("", "get", "pods", "-n", ns, "-l", selector, "-o", "jsonpath={.items[*].status.phase}")
		return err == nil && out == "Running", nil
	})
	if err != nil {
		out, _ := kubectl("", "get", "chainerjob,pods", "-n", ns, "-o", "wide")
		t.Fatalf("the job's launcher is not Running: %v\n%s", err, out)
	}
	running := time.Now()

	restart := time.Now()
	mustKubectl(t, "", "rollout", "restart", "-n", operatorNS, operatorDeploy)
	status, err := kubectl("", "rollout", "status", "-n", operatorNS, operatorDeploy, "--timeout=240s")
	if err != nil {
		t.Fatalf("the rollout did not finish: %v\n%s%s", err, status, operatorDiagnostics())
	}
	took := time.Since(restart)
	t.Logf("rollout restart of the operator (2 replicas) finished in %v:\n%s", took.Round(100*time.Millisecond), status)
	if phase := mustKubectl(t, "", "get", "chainerjob", "-n", ns, job, "-o", "jsonpath={.status.phase}"); phase != "Running" {
		t.Fatalf("the job is %q once the rollout finished %v after its launcher ran, before the test let it finish",
			phase, time.Since(running).Round(time.Second))
	}
	letFinish(t, ns)
	if out, err := kubectl("", "wait", "-n", ns, "chainerjob/"+job, "--for=condition=Succeeded", "--timeout=240s"); err != nil {
		status, _ := kubectl("", "get", "chainerjob", "-n", ns, job, "-o", "jsonpath={.status}")
		logs, _ := kubectl("", "logs", "-n", ns, "job/"+job+"-master", "--all-containers")
		t.Fatalf("the job did not succeed: %v\n%s\nstatus: %s\nlauncher logs:\n%s", err, out, status, logs)
	}
	t.Logf("the job Succeeded %v after its launcher started", time.Since(running).Round(time.Second))
	if logs := mustKubectl(t, "", "logs", "-n", ns, "job/"+job+"-master"); !strings.Contains(logs, job+"-master") {
		t.Errorf("the master's log lacks its host name %s-master...:\n%s", job, logs)
	}

	_ = watch.Process.Kill()
	_ = watch.Wait()
	names := map[string]bool{}
	for _, l := range strings.Fields(seen.String()) {
		names[l] = true
	}
	if len(names) != 1 {
		t.Errorf("want exactly one launcher pod over the job's life, the watch saw %d: %v", len(names), names)
	}
}

// operatorDiagnostics is what explains an operator that does not become Ready: its pods, the
// namespace's events and the last lines of every container's log (also the previous one's).
func operatorDiagnostics() string {
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "pods", "-n", operatorNS, "-o", "wide"},
		{"get", "events", "-n", operatorNS, "--sort-by=.lastTimestamp"},
		{"logs", "-n", operatorNS, "-l", "app.kubernetes.io/name=troupe-operator", "--prefix", "--tail=20"},
		{"logs", "-n", operatorNS, "-l", "app.kubernetes.io/name=troupe-operator", "--prefix", "--tail=20", "--previous"},
	} {
		out, _ := kubectl("", args...)
		fmt.Fprintf(&b, "\n$ kubectl %s\n%s", strings.Join(args, " "), out)
	}
	return b.String()
}
