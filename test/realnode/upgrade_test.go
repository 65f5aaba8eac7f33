package realnode

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
	"github.com/troupe-dev/troupe/test/doccommands"
)

// finishFile ends the running jobs' programs: they run until the test creates it in their pods
// (kubectl exec), once the upgrade has been checked, however long the upgrade took.
const finishFile = "/tmp/finish"

// The previous release, as make test-realnode prepares it (hack/previous-release.sh).
type previousRelease struct {
	version, src string
	archives     []string
}

func previous(t *testing.T) previousRelease {
	t.Helper()
	p := previousRelease{version: os.Getenv("TROUPE_PREVIOUS_RELEASE"), src: os.Getenv("TROUPE_PREVIOUS_RELEASE_SRC")}
	p.archives = strings.Fields(os.Getenv("TROUPE_PREVIOUS_RELEASE_IMAGES"))
	if p.version == "" || p.src == "" || len(p.archives) == 0 {
		t.Fatal("TROUPE_PREVIOUS_RELEASE, _SRC and _IMAGES are not set: run with make test-realnode")
	}
	return p
}

// TestUpgradeUnderRunningJobs installs the previous release (built from its pinned commit of
// this repository), starts one job of every kind and form under it (MPIJob in the T9k, the
// FFFFFaraway and kubeflow's form; a suspended one, a Volcano gang, one queued in Kueue), and
// upgrades to this checkout's operator while they run, with the docs' upgrade commands as
// written (test/doccommands): kustomize's (config/) over the previous release's kustomize
// install (deploy/'s then applied over it, the same objects), and
// Helm's (the new CRDs taken over from Helm, then helm upgrade) over its chart. After each
// upgrade, once the new operator has taken every job over (it labels their children with
// troupe.dev/job-name, which the previous release did not write), no child was replaced (same
// UIDs), no StatefulSet's or Job's generation moved, no pod was replaced or restarted, and no
// job reports a held template change; then every job ends as it would have: the running ones
// Succeed, the suspended one Succeeds once resumed, the queued one stays queued. The Helm case
// then rolls back to the previous release (a downgrade) under a new running job and records
// what that does. Each case ends with the docs' uninstall, after which nothing of troupe may be
// left. The kubectl case is a long test (make test-long): the Helm case walks the same upgrade
// of the same jobs.
func TestUpgradeUnderRunningJobs(t *testing.T) {
	prev := previous(t)
	stopOperator()
	realNodeOnly(t)
	out, err := exec.Command(filepath.Join(repoRoot, "hack", "controlplane", "realnode-import.sh"), prev.archives...).CombinedOutput()
	if err != nil {
		t.Fatalf("import the previous release's images: %v\n%s", err, out)
	}
	oldImage := "ghcr.io/troupe-dev/troupe-operator:" + prev.version

	var none doccommands.Values // the checkouts' commands have no placeholder
	t.Run("kubectl", func(t *testing.T) {
		testutil.LongOnly(t)
		// The previous release's kustomize install, in its checkout, as CHANGELOG names it; the
		// upgrade is the docs' upgrade of the kustomize install (config/), then deploy/'s
		// applied over it; the uninstall is deploy/'s (the installs hold the same objects).
		runDocs(t, prev.src, doccommands.PreviousKustomize, doccommands.Install, none)
		t.Cleanup(func() { uninstallWithDocs(t, repoRoot, doccommands.Deploy, none) })
		checkInstallOf(t, oldImage)
		ns := namespaceNotOptedIn(t, "upgrade-kubectl")
		describeOnFailure(t, ns)
		startUpgradeJobs(t, ns)
		before := snapshot(t, ns)

		// CHANGELOG's upgrade notes: the jobs' namespaces opted in first.
		runDocs(t, repoRoot, doccommands.Kustomize, doccommands.OptIn, none)
		checkOptedIn(t, ns)
		start := time.Now()
		runDocs(t, repoRoot, doccommands.Kustomize, doccommands.Upgrade, none)
		checkInstallOf(t, operatorImage)
		t.Logf("the docs' kubectl upgrade: the new operator available %v after the apply", time.Since(start).Round(time.Second))
		checkUndisturbed(t, ns, before)
		// deploy/'s upgrade, over the same release: the rendered install is the same objects.
		runDocs(t, repoRoot, doccommands.Deploy, doccommands.Upgrade, none)
		checkInstallOf(t, operatorImage)
		checkUndisturbed(t, ns, before)
		finishUpgradeJobs(t, ns)
	})

	t.Run("helm", func(t *testing.T) {
		helm := os.Getenv("HELM")
		run := func(args ...string) {
			t.Helper()
			out, err := exec.Command(helm, append(args, "--kubeconfig", kubeconfig, "--namespace", operatorNS)...).CombinedOutput()
			if err != nil {
				t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		// The docs' Helm install, run in the previous release's checkout: its chart.
		t.Cleanup(func() { uninstallWithDocs(t, repoRoot, doccommands.Helm, none) })
		runDocs(t, repoRoot, doccommands.Helm, doccommands.PrepareNamespace, none)
		runDocs(t, prev.src, doccommands.Helm, doccommands.Install, none)
		checkInstallOf(t, oldImage)
		ns := namespaceNotOptedIn(t, "upgrade-helm")
		describeOnFailure(t, ns)
		startUpgradeJobs(t, ns)
		before := snapshot(t, ns)
		runDocs(t, repoRoot, doccommands.Helm, doccommands.OptIn, none)
		checkOptedIn(t, ns)

		// The docs' Helm upgrade: the new CRDs first (Helm leaves crds/ alone on upgrade), taken
		// over from Helm, then the chart.
		// Why the docs force it: Helm created the CRDs and owns their fields, so the same
		// apply without --force-conflicts is refused wherever it would change a value Helm
		// wrote. Where the new CRDs change no such value (a release whose CRDs are the previous
		// ones, fields added only), it goes through and changes nothing of Helm's.
		for _, c := range docs(t, doccommands.Helm, doccommands.UpgradeCRDs, none) {
			specs := crdSpecs(t)
			plain := exec.Command("sh", "-c", strings.Replace(c.Text, " --force-conflicts", "", 1))
			plain.Dir, plain.Env = repoRoot, append(os.Environ(), "KUBECONFIG="+kubeconfig)
			out, err := plain.CombinedOutput()
			switch {
			case err != nil && strings.Contains(string(out), "conflict"):
				t.Logf("without --force-conflicts: %s", firstLines(string(out), 2))
			case err != nil:
				t.Errorf("%s without --force-conflicts: %v, want refused for conflicts with Helm's fields or applied\n%s", c.Text, err, firstLines(string(out), 5))
			default:
				if changed := changedCRDs(specs, crdSpecs(t)); len(changed) > 0 {
					t.Errorf("%s without --force-conflicts changed %v over Helm's fields without a conflict", c.Text, changed)
				} else {
					t.Logf("without --force-conflicts: applied, no conflict: the new CRDs change no value the previous chart wrote")
				}
			}
		}
		start := time.Now()
		runDocs(t, repoRoot, doccommands.Helm, doccommands.UpgradeCRDs, none)
		runDocs(t, repoRoot, doccommands.Helm, doccommands.Upgrade, none)
		checkInstallOf(t, operatorImage)
		t.Logf("helm upgrade: the new operator available %v after the CRDs were applied", time.Since(start).Round(time.Second))
		checkUndisturbed(t, ns, before)

		// A downgrade under a job the new release made: helm rollback to the previous release's
		// chart (the CRDs stay the new ones: Helm never touches them).
		down := namespace(t, "downgrade-helm")
		describeOnFailure(t, down)
		mustKubectl(t, chainerJob("made-by-new", ""), "create", "-n", down, "-f", "-")
		waitRunning(t, down, "chainerjob/made-by-new")
		beforeDown, hashBefore := snapshot(t, down), workerSetHash(down)
		run("rollback", "troupe", "1", "--wait", "--timeout", "5m")
		checkInstallOf(t, oldImage)
		reportDowngrade(t, down, beforeDown, hashBefore)

		finishUpgradeJobs(t, ns)
		letFinish(t, down)
		if _, err := waitCondition(t, down, "chainerjob.troupe.dev/made-by-new", "Succeeded", 5*time.Minute); err != nil {
			t.Errorf("the job made by the new release did not succeed under the previous one: %v", err)
		}
	})
}

// checkOptedIn: the namespace carries the opt-in label troupe.dev/jobs=enabled.
func checkOptedIn(t *testing.T, ns string) {
	t.Helper()
	if l := mustKubectl(t, "", "get", "namespace", ns, "-o", `jsonpath={.metadata.labels.troupe\.dev/jobs}`); l != "enabled" {
		t.Fatalf("namespace %s after the docs' opt-in: troupe.dev/jobs=%q, want enabled", ns, l)
	}
}

// crdSpecs returns troupe's CRDs' specs as stored, by name.
func crdSpecs(t *testing.T) map[string]string {
	t.Helper()
	specs := map[string]string{}
	out := mustKubectl(t, "", "get", "crd", "-o", `jsonpath={range .items[*]}{.metadata.name}{" "}{.spec}{"\n"}{end}`)
	for _, line := range strings.Split(out, "\n") {
		if name, spec, ok := strings.Cut(line, " "); ok && strings.HasSuffix(name, ".troupe.dev") {
			specs[name] = spec
		}
	}
	return specs
}

// changedCRDs names the CRDs whose spec differs between before and after.
func changedCRDs(before, after map[string]string) []string {
	var changed []string
	for name, spec := range after {
		if before[name] != spec {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	return changed
}

// The jobs' programs: a launcher or master that runs until finishFile exists and ends, and a
// worker that runs until it is released (or, where workers run to completion, as the launcher).
const (
	launcherCommand = "until [ -e " + finishFile + " ]; do sleep 1; done; echo done"
	workerCommand   = "while true; do sleep 1 & wait; done"
)

// chainerJob is a ChainerJob of the upgrade test: extra is more spec.
func chainerJob(name, extra string) string {
	return realNodeChainerJob(name, extra, launcherCommand, workerCommand)
}

// farawayJob is an MPIJob of FFFFFaraway's form with one worker; extra is more spec.
func farawayJob(name, extra, launcher string) string {
	return fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: MPIJob
metadata: {name: %s}
spec:
%s  numWorkers: 1
  launcherTemplate:
    spec:
%s  workerTemplate:
    spec:
%s`, name, extra, realNodePod(6, "horovod-master", launcher), realNodePod(6, "horovod-worker", workerCommand))
}

// upgradeJobs are the jobs of TestUpgradeUnderRunningJobs, by resource/name, and their manifests.
func upgradeJobs() map[string]string {
	launcher, worker := launcherCommand, workerCommand
	return map[string]string{
		"chainerjob/chainer": chainerJob("chainer", ""),
		"chainerjob/gang":    chainerJob("gang", "  schedulingPolicy: {gang: Volcano}\n"),
		"chainerjob/queued": strings.Replace(chainerJob("queued", ""), "metadata: {name: queued}",
			"metadata: {name: queued, labels: {kueue.x-k8s.io/queue-name: upgrade-nowhere}}", 1),
		"mpijob/t9k": fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: MPIJob
metadata: {name: t9k}
spec:
  transport: KubeExec
  launcher:
    template:
      spec:
%s  worker:
    replicas: 2
    template:
      spec:
%s`, realNodePod(8, "launcher", launcher), realNodePod(8, "mpi-worker", worker)),
		"mpijob/faraway": farawayJob("faraway", "", launcher),
		// Resumed after the upgrade, when no file ends its launcher any more: it ends by itself.
		"mpijob/suspended": farawayJob("suspended", "  runPolicy: {suspend: true}\n", "echo done"),
		"mpijob/kubeflow": fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: MPIJob
metadata: {name: kubeflow}
spec:
  transport: KubeExec
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
%s    Worker:
      replicas: 1
      template:
        spec:
%s`, realNodePod(10, "launcher", launcher), realNodePod(10, "worker", worker)),
		"horovodjob/horovod": fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: HorovodJob
metadata: {name: horovod}
spec:
  transport: KubeExec
  launcher:
    template:
      spec:
%s  worker:
    replicas: 1
    template:
      spec:
%s`, realNodePod(8, "launcher", launcher), realNodePod(8, "horovod", worker)),
		"pytorchjob/pytorch": fmt.Sprintf(`apiVersion: troupe.dev/v1alpha1
kind: PyTorchJob
metadata: {name: pytorch}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
%s    Worker:
      replicas: 2
      template:
        spec:
%s`, realNodePod(10, "pytorch", launcher), realNodePod(10, "pytorch", launcher)),
	}
}

// startUpgradeJobs creates every job of upgradeJobs and waits for the ones that run.
func startUpgradeJobs(t *testing.T, ns string) {
	t.Helper()
	jobs := upgradeJobs()
	for _, name := range slices.Sorted(maps.Keys(jobs)) {
		mustKubectl(t, jobs[name], "create", "-n", ns, "-f", "-")
	}
	for _, name := range slices.Sorted(maps.Keys(jobs)) {
		if name == "mpijob/suspended" || name == "chainerjob/queued" {
			continue
		}
		waitRunning(t, ns, name)
	}
}

// waitRunning waits for a job's phase Running with every pod of the job running.
func waitRunning(t *testing.T, ns, job string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		// A failed get is retried like a job not running yet.
		state, _ := kubectl("", "get", "-n", ns, job, "-o", "jsonpath={.status.phase} {.metadata.uid}")
		phase, uid, _ := strings.Cut(state, " ")
		if phase != "Running" {
			return false, nil
		}
		phases, _ := kubectl("", "get", "pods", "-n", ns, "-l", "troupe.dev/job-uid="+uid, "-o", "jsonpath={.items[*].status.phase}")
		f := strings.Fields(phases)
		return len(f) > 0 && !slices.ContainsFunc(f, func(p string) bool { return p != "Running" }), nil
	})
	if err != nil {
		out, _ := kubectl("", "get", "-n", ns, job+",pods", "-o", "wide")
		t.Fatalf("%s is not running with all its pods: %v\n%s", job, err, out)
	}
}

// childResources are the kinds of object a troupe job owns, as kubectl names them.
const childResources = "jobs.batch,statefulsets.apps,services,configmaps,secrets,serviceaccounts,roles,rolebindings," +
	"networkpolicies,poddisruptionbudgets,podgroups.scheduling.volcano.sh,persistentvolumeclaims,horizontalpodautoscalers.autoscaling"

// snapshot is every child and pod of the namespace: "<kind>/<name> uid=<uid> generation=<n>"
// and, for pods, the containers' restart counts.
func snapshot(t *testing.T, ns string) []string {
	t.Helper()
	children := mustKubectl(t, "", "get", childResources, "-n", ns, "-o",
		`jsonpath={range .items[*]}{.kind}/{.metadata.name} uid={.metadata.uid} generation={.metadata.generation}{"\n"}{end}`)
	pods := mustKubectl(t, "", "get", "pods", "-n", ns, "-o",
		`jsonpath={range .items[*]}Pod/{.metadata.name} uid={.metadata.uid} restarts={.status.containerStatuses[*].restartCount}{"\n"}{end}`)
	lines := strings.Split(strings.TrimSpace(children+pods), "\n")
	slices.Sort(lines)
	return lines
}

// checkUndisturbed waits until the new operator has taken every job of ns over (every child
// carries troupe.dev/job-name, which only the new release writes), then compares the namespace
// with the snapshot taken before the upgrade.
func checkUndisturbed(t *testing.T, ns string, before []string) {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		out, err := kubectl("", "get", "jobs.batch,statefulsets.apps,services,configmaps", "-n", ns, "-l", "troupe.dev/job-uid",
			"-o", `jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.labels.troupe\.dev/job-name}{"\n"}{end}`)
		return err == nil && !strings.Contains(out, "=\n"), nil
	})
	if err != nil {
		out, _ := kubectl("", "get", "jobs.batch,statefulsets.apps,services,configmaps", "-n", ns, "-l", "troupe.dev/job-uid", "--show-labels")
		t.Fatalf("the new operator did not take every job over (children without troupe.dev/job-name): %v\n%s", err, out)
	}
	t.Logf("the new operator labelled every child %v after it was available", time.Since(start).Round(time.Second))
	after := snapshot(t, ns)
	if !slices.Equal(before, after) {
		t.Errorf("the upgrade changed the jobs' children or pods:\nbefore:\n%s\nafter:\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	} else {
		t.Logf("the upgrade left %d children and pods as they were (UIDs, generations, restart counts)", len(after))
	}
	drift := mustKubectl(t, "", "get", "chainerjobs,mpijobs,horovodjobs,pytorchjobs", "-n", ns, "-o",
		`jsonpath={range .items[*]}{.metadata.name}: {.status.conditions[?(@.type=="TemplateDrift")].status}{"\n"}{end}`)
	if strings.Contains(drift, "True") {
		t.Errorf("a job reports a held template change after the upgrade:\n%s", drift)
	}
}

// finishUpgradeJobs resumes the suspended job and waits for every job to end as it would have
// without the upgrade: the queued one is still queued, the others Succeed.
func finishUpgradeJobs(t *testing.T, ns string) {
	t.Helper()
	letFinish(t, ns)
	mustKubectl(t, "", "patch", "-n", ns, "mpijob/suspended", "--type=merge", "-p", `{"spec":{"runPolicy":{"suspend":false}}}`)
	for _, name := range slices.Sorted(maps.Keys(upgradeJobs())) {
		if name == "chainerjob/queued" {
			continue
		}
		resource := strings.Replace(name, "/", ".troupe.dev/", 1)
		if took, err := waitCondition(t, ns, resource, "Succeeded", 5*time.Minute); err != nil {
			t.Errorf("%s did not succeed after the upgrade: %v", name, err)
		} else {
			t.Logf("%s Succeeded (waited %.0fs for it)", name, took.Seconds())
		}
	}
	queued := mustKubectl(t, "", "get", "-n", ns, "chainerjob/queued", "-o",
		`jsonpath={.status.phase} {.status.conditions[?(@.type=="Suspended")].status}`)
	pods := mustKubectl(t, "", "get", "pods", "-n", ns, "-l", "troupe.dev/job-name=queued", "-o", "name")
	if !strings.HasSuffix(queued, " True") || pods != "" {
		t.Errorf("the queued job is %q with pods %q, want still suspended, no pod", queued, pods)
	}
}

// workerSetHash is the spec hash the operator recorded on the ChainerJob made-by-new's worker
// StatefulSet.
func workerSetHash(ns string) string {
	out, _ := kubectl("", "get", "statefulset", "-n", ns, "made-by-new-workerset-ws0", "-o", `jsonpath={.metadata.annotations.troupe\.dev/spec-hash}`)
	return out
}

// letFinish creates finishFile in every running pod of ns, which ends the launchers' programs.
func letFinish(t *testing.T, ns string) {
	t.Helper()
	pods := mustKubectl(t, "", "get", "pods", "-n", ns, "--field-selector=status.phase=Running", "-o", "name")
	for _, pod := range strings.Fields(pods) {
		mustKubectl(t, "", "exec", "-n", ns, pod, "--", "touch", finishFile)
	}
}

// reportDowngrade logs what the previous release does to a running job the new one made, and
// fails only on what would disturb it: a replaced child or pod, or a restarted container.
func reportDowngrade(t *testing.T, ns string, before []string, hashBefore string) {
	t.Helper()
	// The previous release builds the children without troupe.dev/job-name, so their recorded
	// spec hash differs from the new release's: it writes its own on each child it takes over.
	// Wait for that on the job's worker StatefulSet, then compare.
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		return workerSetHash(ns) != hashBefore, nil
	})
	if err != nil {
		t.Fatalf("the previous release did not take the job over (the worker StatefulSet's spec hash is still %s): %v", hashBefore, err)
	}
	after := snapshot(t, ns)
	if !slices.Equal(before, after) {
		t.Errorf("the downgrade changed the job's children or pods:\nbefore:\n%s\nafter:\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	conditions := mustKubectl(t, "", "get", "chainerjob", "-n", ns, "made-by-new", "-o",
		`jsonpath={range .status.conditions[*]}{.type}={.status} ({.reason}){"\n"}{end}`)
	t.Logf("after the downgrade, the job made by the new release has:\n%s", conditions)
}
