package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// env is the bench's cluster and what runs beside it.
type env struct {
	o          *options
	kubeconfig string
	// admin talks to the API server straight and unthrottled: the bench's own watches, the
	// jobs a user creates, the launchers' release.
	admin    *rest.Config
	dyn      dynamic.Interface
	kube     kubernetes.Interface
	proxy    *countingProxy
	troupe   string // troupe-operator binary
	floor    string // watchfloor binary (-watch-floor)
	mpiOp    string // mpi-operator binary
	hookPort string
}

// setUp brings the cluster up, installs both MPIJob CRDs, builds troupe-operator, points the
// cluster's webhooks at it and starts the counting proxy. The env it returns (even with an
// error) must be torn down.
func setUp(ctx context.Context, o *options) (*env, error) {
	e := &env{o: o}
	e.mpiOp = envOr("MPI_OPERATOR_BIN", "")
	crd := envOr("MPI_OPERATOR_CRD", "")
	crds := []string{"-f", filepath.Join(o.repoRoot, "config", "crds")}
	if slices.Contains(o.sides, "mpi-operator") {
		if e.mpiOp == "" || crd == "" {
			return nil, fmt.Errorf("MPI_OPERATOR_BIN and MPI_OPERATOR_CRD are not set: run it with `make bench`")
		}
		crds = append(crds, "-f", crd)
	}
	out, err := e.script(ctx, "hack/controlplane/cluster-up.sh", "CLUSTER_NAME="+o.cluster, "DISABLE_QPS_LIMITS=1",
		"NODES="+filepath.Join(o.repoRoot, "test", "bench", "controllers", "nodes.yaml"))
	if err != nil {
		return e, fmt.Errorf("cluster-up: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	e.kubeconfig = strings.TrimSpace(lines[len(lines)-1])
	if e.admin, err = clientcmd.BuildConfigFromFlags("", e.kubeconfig); err != nil {
		return e, err
	}
	e.admin.QPS, e.admin.Burst = -1, 0
	if e.dyn, err = dynamic.NewForConfig(e.admin); err != nil {
		return e, err
	}
	if e.kube, err = kubernetes.NewForConfig(e.admin); err != nil {
		return e, err
	}
	if out, err := e.kubectl(ctx, append([]string{"apply", "--server-side"}, crds...)...); err != nil {
		return e, fmt.Errorf("install CRDs: %w\n%s", err, out)
	}
	if out, err := e.kubectl(ctx, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		return e, fmt.Errorf("CRDs: %w\n%s", err, out)
	}
	e.troupe = filepath.Join(o.out, "bin", "troupe-operator")
	build := exec.CommandContext(ctx, "go", "build", "-o", e.troupe, "./cmd/troupe-operator")
	build.Dir = o.repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return e, fmt.Errorf("build troupe-operator: %w\n%s", err, out)
	}
	if o.watchFloor {
		e.floor = filepath.Join(o.out, "bin", "watchfloor")
		build := exec.CommandContext(ctx, "go", "build", "-o", e.floor, "./test/bench/watchfloor")
		build.Dir = o.repoRoot
		if out, err := build.CombinedOutput(); err != nil {
			return e, fmt.Errorf("build watchfloor: %w\n%s", err, out)
		}
	}
	hooks, err := testutil.FreePort()
	if err != nil {
		return e, err
	}
	_, e.hookPort, _ = net.SplitHostPort(hooks)
	if _, err := e.script(ctx, "hack/webhooks-local.sh "+e.hookPort, "KUBECONFIG="+e.kubeconfig); err != nil {
		return e, fmt.Errorf("webhook configuration: %w", err)
	}
	if e.proxy, err = startProxy(e.admin); err != nil {
		return e, err
	}
	return e, nil
}

func (e *env) tearDown() {
	if e.proxy != nil {
		e.proxy.close()
	}
	if e.o.keep || e.kubeconfig == "" {
		return
	}
	if _, err := e.script(context.Background(), "hack/controlplane/cluster-down.sh", "CLUSTER_NAME="+e.o.cluster); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-down:", err)
	}
}

// proxyKubeconfig writes a kubeconfig that reaches the API server through the counting proxy,
// for an operator.
func (e *env) proxyKubeconfig(name string) (string, error) {
	path := filepath.Join(e.o.out, name+".kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: "http://%s"}}]
users: [{name: bench, user: {}}]
contexts: [{name: bench, context: {cluster: bench, user: bench}}]
current-context: bench
`, e.proxy.addr)
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// script runs a repository script (with arguments, split on spaces) with extra environment; its
// stderr goes to ours, its stdout is returned.
func (e *env) script(ctx context.Context, cmdline string, extraEnv ...string) (string, error) {
	args := strings.Fields(cmdline)
	cmd := exec.CommandContext(ctx, filepath.Join(e.o.repoRoot, args[0]), args[1:]...)
	cmd.Dir = e.o.repoRoot
	cmd.Env = append(os.Environ(), extraEnv...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	err := cmd.Run()
	return stdout.String(), err
}

func (e *env) kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// process is an operator the bench started, with its CPU and memory read from /proc.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

// start runs bin as the side name's operator, with the bench's environment and extraEnv.
func (e *env) start(name string, extraEnv []string, bin string, args ...string) (*process, error) {
	logFile, err := os.Create(filepath.Join(e.o.out, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to end (SIGTERM), and kills it after 20 s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.log.Close()
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
