// Package e2e runs troupe-operator, as the separate process a user runs, against a simulated
// cluster: a real kube-apiserver, etcd, kube-controller-manager (Job, StatefulSet and garbage
// collector controllers) and kube-scheduler, with kwok faking the nodes and the pods' lifecycle.
// The cluster comes from hack/controlplane/cluster-up.sh, the same script `make demo` uses.
//
// The tests share that cluster and that operator, and run side by side (t.Parallel; make
// test-e2e sets how many at once with -parallel): each works in a namespace of its own, and a
// test whose outcome depends on capacity (gangs, quotas, placement) has nodes (a pool) and Kueue
// queues of its own, not the cluster's shared nodes (hack/controlplane/nodes.yaml). A test that
// disturbs what the others share does not call t.Parallel, and says why: it stops or restarts
// the operator (and so its webhooks), changes cluster-wide objects the others use, starts
// another cluster, or bounds a time that a loaded machine would stretch. go test runs those
// first, one at a time, and the parallel tests only once the last of them has ended, so none of
// them overlaps another test.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

var (
	repoRoot   = filepath.Join("..", "..")
	kubeconfig string
	k8s        client.Client
	// operator is the troupe-operator process under test (restartOperator replaces it).
	operator *testutil.Operator
)

const (
	pollInterval = 200 * time.Millisecond
	waitTimeout  = 90 * time.Second
)

// operatorArgs are the flags of the operator under test beyond the local cluster's: a node not
// Ready for 15 s is lost (2 minutes by default), so that a test of lost nodes waits that long
// (lost_node_test.go).
var operatorArgs = []string{"--lost-node-timeout=15s"}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	cluster := envOr("TROUPE_E2E_CLUSTER", "troupe-e2e")
	out, err := script("hack/controlplane/cluster-up.sh", "CLUSTER_NAME="+cluster)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster-up: %v\n%s", err, out)
		return 1
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	kubeconfig = strings.TrimSpace(lines[len(lines)-1])
	defer func() {
		if os.Getenv("TROUPE_E2E_KEEP") == "" {
			if out, err := script("hack/controlplane/cluster-down.sh", "CLUSTER_NAME="+cluster); err != nil {
				fmt.Fprintf(os.Stderr, "cluster-down: %v\n%s", err, out)
			}
		}
	}()

	if out, err := kubectl("apply", "--server-side", "-f", filepath.Join(repoRoot, "config", "crds")); err != nil {
		fmt.Fprintf(os.Stderr, "install CRDs: %v\n%s", err, out)
		return 1
	}
	stop, err := startOperator()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start operator:", err)
		return 1
	}
	defer stop()

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = troupev1.AddToScheme(scheme)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		return 1
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	return m.Run()
}

// startOperator builds troupe-operator and runs it against the cluster, as `make demo` does,
// and waits until it reports ready. Its log goes to $TROUPE_E2E_LOG or a temporary file.
func startOperator() (func(), error) {
	op, err := testutil.StartOperator(repoRoot, kubeconfig, os.Getenv("TROUPE_E2E_LOG"), operatorArgs...)
	if err != nil {
		return nil, err
	}
	operator = op
	return func() {
		operator.Stop()
		fmt.Fprintln(os.Stderr, "operator log:", operator.LogPath)
	}, nil
}

// restartOperator stops the operator and starts a new process, as a crash, a rolling update or
// a new leader does: it starts with empty caches and no memory of the old one. args are flags
// beyond operatorArgs.
func restartOperator(t *testing.T, args ...string) {
	t.Helper()
	operator.Stop()
	t.Log("operator log before the restart:", operator.LogPath)
	logPath := ""
	if p := os.Getenv("TROUPE_E2E_LOG"); p != "" {
		logPath = fmt.Sprintf("%s.restarted-%d", p, time.Now().UnixNano())
	}
	op, err := testutil.StartOperator(repoRoot, kubeconfig, logPath, append(slices.Clone(operatorArgs), args...)...)
	if err != nil {
		t.Fatalf("restart the operator: %v", err)
	}
	operator = op
}

// script runs one of the repository's scripts with extra environment and returns its stdout.
func script(path string, env ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot, path))
	cmd.Env = append(os.Environ(), env...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	err := cmd.Run()
	return stdout.String(), err
}

// kubectl runs the real kubectl against the cluster.
func kubectl(args ...string) (string, error) {
	// A fresh discovery cache for every call: kubectl does not refresh a cached discovery for
	// categories (`kubectl get troupe`), and the CRDs are installed after the first call.
	cache, err := os.MkdirTemp("", "troupe-e2e-kubectl-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(cache) }()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig, "--cache-dir", cache}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// newNamespace makes a namespace for one test, whose state the test prints if it fails.
func newNamespace(t *testing.T) string {
	ns := testutil.NewNamespace(t, k8s, "e2e-")
	reportOnFailure(t, ns)
	return ns
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	testutil.Eventually(t, what, pollInterval, waitTimeout, cond)
}
