// Package realnode is the smoke test of the local cluster's real node: pods of the troupe-mpi
// image run in containers (containerd + runc) on this machine, beside the kwok nodes, and reach
// each other through the cluster's DNS and Service addresses. The cluster and the node come
// from hack/controlplane/cluster-up.sh with REAL_NODE=1, the way a user starts them.
//
// The install tests (TestInstall, TestInstallFromRelease, TestUpgradeUnderRunningJobs) stop the
// local operator and install troupe in the cluster, and the tests of kubeflow's pi examples
// (TestKubeflowPi, TestMPI5AndMPICH42, TestLauncherRestartsInPlace) ask for half or whole CPUs
// of the two-CPU node and lift its taint (realNodeOnly), so these run one at a time. Every other
// test calls t.Parallel() first and so runs after them (Go runs a package's parallel tests once
// its others are done), REALNODE_PARALLEL of them side by side, each in a namespace of its own,
// with the one local operator they share (needOperator).
package realnode

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var (
	repoRoot   = filepath.Join("..", "..")
	kubeconfig string
	cluster    string
)

const (
	// The real node's label and taint (hack/controlplane/realnode-up.sh).
	nodeLabel = "troupe.dev/real-node"
	mpiImage  = "ghcr.io/troupe-dev/troupe-mpi:v0.1.0"
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// One real node per machine: a second run (another clone's make test) waits here.
	cache := envOr("TROUPE_CACHE", filepath.Join(os.Getenv("HOME"), ".cache", "troupe"))
	if err := os.MkdirAll(cache, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	lock, err := os.OpenFile(filepath.Join(cache, "realnode-test.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		fmt.Fprintln(os.Stderr, "lock:", err)
		return 1
	}

	cluster = envOr("TROUPE_REALNODE_CLUSTER", "troupe-realnode")
	down := func() {
		if os.Getenv("TROUPE_REALNODE_KEEP") != "" {
			return
		}
		if out, err := script("hack/controlplane/cluster-down.sh", "CLUSTER_NAME="+cluster); err != nil {
			fmt.Fprintf(os.Stderr, "cluster-down: %v\n%s", err, out)
		}
	}
	// An interrupted run still stops the node and undoes what it did to the machine.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		stopOperator()
		down()
		os.Exit(1)
	}()
	defer down()

	// The cluster's default add-ons; with $TROUPE_REALNODE_METRICS=1 (make test-autoscale) also
	// metrics-server, whose resource metrics the autoscaler of TestHPAScalesElasticPyTorch reads:
	// its build from Go modules takes minutes, which make test does not pay.
	addons := "gang kueue"
	if os.Getenv("TROUPE_REALNODE_METRICS") == "1" {
		addons += " metrics"
	}
	out, err := script("hack/controlplane/cluster-up.sh", "CLUSTER_NAME="+cluster, "REAL_NODE=1", "CLUSTER_ADDONS="+addons)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster-up: %v\n%s", err, out)
		return 1
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	kubeconfig = strings.TrimSpace(lines[len(lines)-1])
	defer stopOperator() // before the cluster goes (defers run last first)
	return m.Run()
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// script runs a script of the repository with extra environment and returns its output.
func script(path string, env ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot, path))
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	return out.String(), err
}

// kubectl runs kubectl (the cluster's version, on PATH from make) against the cluster, with
// stdin, and returns its combined output.
func kubectl(stdin string, args ...string) (string, error) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustKubectl is kubectl that fails the test on error.
func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := kubectl(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// namespace makes a namespace for one test, opted in to troupe jobs (labelled
// troupe.dev/jobs=enabled from its creation, as a cluster admin does: docs/operations.md), and
// deletes it, and waits for its pods to go, when the test ends (so their containers are gone
// before the node stops).
func namespace(t *testing.T, name string) string {
	t.Helper()
	mustKubectl(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels: {troupe.dev/jobs: enabled}\n", name),
		"create", "-f", "-")
	deleteAtEnd(t, name)
	return name
}

// namespaceNotOptedIn makes a namespace without the opt-in label, as namespaces were before
// troupe asked for it (the previous release's), and deletes it when the test ends.
func namespaceNotOptedIn(t *testing.T, name string) string {
	t.Helper()
	mustKubectl(t, "", "create", "namespace", name)
	deleteAtEnd(t, name)
	return name
}

// deleteAtEnd deletes a namespace of the test, and waits for its pods to go, when it ends.
func deleteAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		if out, err := kubectl("", "delete", "namespace", name, "--wait=true", "--timeout=120s"); err != nil {
			t.Errorf("delete namespace %s: %v\n%s", name, err, out)
		}
	})
}
