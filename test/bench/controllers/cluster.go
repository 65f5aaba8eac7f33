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
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// env is what the bench builds once for all its clusters.
type env struct {
	o *options
	// troupeBins are the troupe-operator binaries of the troupe sides.
	troupeBins map[string]string
	floor      string // watchfloor binary (-watch-floor)
	mpiOp      string // mpi-operator binary
	mpiCRD     string
}

// cluster is one profile's cluster and what runs beside it.
type cluster struct {
	*env
	profile    clusterProfile
	started    bool // cluster-up.sh ran: down() runs cluster-down.sh
	kubeconfig string
	// admin talks to the API server straight and unthrottled: the bench's own watches, the
	// jobs a user creates, the launchers' release.
	admin    *rest.Config
	dyn      dynamic.Interface
	kube     kubernetes.Interface
	proxy    *countingProxy
	hookPort string
}

// build builds troupe-operator for each troupe side (this checkout, or -troupe-a's and
// -troupe-b's binary or revision) and the watch floor, and finds mpi-operator.
func build(ctx context.Context, o *options) (*env, error) {
	e := &env{o: o, troupeBins: map[string]string{}}
	if slices.Contains(o.sides, "mpi-operator") {
		e.mpiOp, e.mpiCRD = envOr("MPI_OPERATOR_BIN", ""), envOr("MPI_OPERATOR_CRD", "")
		if e.mpiOp == "" || e.mpiCRD == "" {
			return nil, fmt.Errorf("MPI_OPERATOR_BIN and MPI_OPERATOR_CRD are not set: run it with `make bench`")
		}
	}
	for _, side := range o.sides {
		if !isTroupe(side) {
			continue
		}
		bin, desc, err := troupeBinary(ctx, o, side, o.troupeRefs[side])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", side, err)
		}
		e.troupeBins[side] = bin
		if desc != "" {
			o.troupeRefs[side] = desc
		}
	}
	if o.watchFloor {
		e.floor = filepath.Join(o.out, "bin", "watchfloor")
		if err := goBuild(ctx, o.repoRoot, e.floor, "./test/bench/watchfloor"); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// troupeBinary is the troupe-operator of ref: this checkout's (""), a binary's path, or a git
// revision's (its tree from `git archive`, built apart). desc says which, for the results.
func troupeBinary(ctx context.Context, o *options, side, ref string) (bin, desc string, err error) {
	bin = filepath.Join(o.out, "bin", side)
	if ref == "" {
		desc = "this checkout"
		if head, err := git(ctx, o.repoRoot, "rev-parse", "--short", "HEAD"); err == nil {
			desc += " (" + head + ")"
		}
		if changed, err := git(ctx, o.repoRoot, "status", "--porcelain", "--untracked-files=no"); err == nil && changed != "" {
			desc += " with uncommitted changes"
		}
		return bin, desc, goBuild(ctx, o.repoRoot, bin, "./cmd/troupe-operator")
	}
	if st, err := os.Stat(ref); err == nil && !st.IsDir() {
		abs, err := filepath.Abs(ref)
		return abs, "binary " + abs, err
	}
	commit, err := git(ctx, o.repoRoot, "rev-parse", "--short", "--verify", ref+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("%q is neither a file nor a git revision: %w", ref, err)
	}
	src := filepath.Join(o.out, "src-"+side)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", "", err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "sh", commit, src)
	archive.Dir = o.repoRoot
	if out, err := archive.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("git archive %s: %w\n%s", commit, err, out)
	}
	err = goBuild(ctx, src, bin, "./cmd/troupe-operator")
	// The sources served the build only: left in the results (inside the checkout's
	// bench-results/), a second copy of the repository is walked by its checks (docrefs).
	if rmErr := os.RemoveAll(src); err == nil {
		err = rmErr
	}
	return bin, "revision " + ref + " (" + commit + ")", err
}

func goBuild(ctx context.Context, dir, bin, pkg string) error {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", abs, pkg)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s in %s: %w\n%s", pkg, dir, err, out)
	}
	return nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// clusterUp brings the profile's cluster up, installs both MPIJob CRDs, points the cluster's
// webhooks at troupe-operator's port and starts the counting proxy. The cluster it returns
// (even with an error) must be taken down.
func (e *env) clusterUp(ctx context.Context, p clusterProfile) (*cluster, error) {
	o := e.o
	c := &cluster{env: e, profile: p}
	crds := []string{"-f", filepath.Join(o.repoRoot, "config", "crds")}
	if e.mpiCRD != "" {
		crds = append(crds, "-f", e.mpiCRD)
	}
	// A plain cluster (no gang schedulers, no Kueue): no side uses them, and on this 2-core
	// machine their watches of every pod and Job took a fifth of a core from all three.
	vars := []string{"CLUSTER_NAME=" + o.cluster, "CLUSTER_ADDONS=", "NODES=" + filepath.Join(o.repoRoot, "test", "bench", "controllers", "nodes.yaml")}
	if p.disableQPSLimits {
		vars = append(vars, "DISABLE_QPS_LIMITS=1")
	}
	// From here the script may have made the cluster, even if it fails: down() deletes it.
	c.started = true
	out, err := c.script(ctx, "hack/controlplane/cluster-up.sh", vars...)
	if err != nil {
		return c, fmt.Errorf("cluster-up: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	c.kubeconfig = strings.TrimSpace(lines[len(lines)-1])
	if c.admin, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig); err != nil {
		return c, err
	}
	c.admin.QPS, c.admin.Burst = -1, 0
	if c.dyn, err = dynamic.NewForConfig(c.admin); err != nil {
		return c, err
	}
	if c.kube, err = kubernetes.NewForConfig(c.admin); err != nil {
		return c, err
	}
	if out, err := c.kubectl(ctx, append([]string{"apply", "--server-side"}, crds...)...); err != nil {
		return c, fmt.Errorf("install CRDs: %w\n%s", err, out)
	}
	if out, err := c.kubectl(ctx, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		return c, fmt.Errorf("CRDs: %w\n%s", err, out)
	}
	hooks, err := testutil.FreePort()
	if err != nil {
		return c, err
	}
	_, c.hookPort, _ = net.SplitHostPort(hooks)
	if _, err := c.script(ctx, "hack/webhooks-local.sh "+c.hookPort, "KUBECONFIG="+c.kubeconfig); err != nil {
		return c, fmt.Errorf("webhook configuration: %w", err)
	}
	if c.proxy, err = startProxy(c.admin); err != nil {
		return c, err
	}
	return c, nil
}

// down stops the proxy and deletes the cluster, unless -keep and it is the last profile's.
func (e *cluster) down() {
	if e.proxy != nil {
		e.proxy.close()
	}
	if !e.started || (e.o.keep && e.profile.name == e.o.profiles[len(e.o.profiles)-1]) {
		return
	}
	if _, err := e.script(context.Background(), "hack/controlplane/cluster-down.sh", "CLUSTER_NAME="+e.o.cluster); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-down:", err)
	}
}

// clusterPIDs are the pids of the simulated cluster's processes (kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler, kwok-controller), by name, from kwokctl's pid files
// beside the kubeconfig; those it cannot read are left out.
func (e *cluster) clusterPIDs() map[string]int {
	dir := filepath.Join(filepath.Dir(e.kubeconfig), "pids")
	files, err := filepath.Glob(filepath.Join(dir, "*.pid"))
	if err != nil {
		return nil
	}
	pids := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
		}
	}
	return pids
}

// proxyKubeconfig writes a kubeconfig that reaches the API server through the counting proxy,
// for an operator.
func (e *cluster) proxyKubeconfig(name string) (string, error) {
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

func (e *cluster) kubectl(ctx context.Context, args ...string) (string, error) {
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

// start runs bin as name (its log name.log), with the bench's environment and extraEnv.
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
