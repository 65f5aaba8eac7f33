package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// env is the harness's own cluster and its clients.
type env struct {
	o          *options
	kubeconfig string
	// up: cluster-up.sh ran, so the cluster may exist (tearDown deletes it).
	up bool
	// clusterDir is kwokctl's directory of the cluster (pids/, logs/).
	clusterDir string
	// components serializes restarts of the cluster's processes (restartComponent and
	// superviseCluster); componentRestarts counts those superviseCluster made, by component.
	components        sync.Mutex
	componentRestarts map[string]int
	cfg               *rest.Config
	c                 client.Client
	kube              kubernetes.Interface
	fleet             *fleet
}

// setUp brings the cluster up (hack/controlplane/cluster-up.sh, with the harness's nodes),
// installs the CRDs, builds the operator and points the webhooks at the fleet's forwarder.
// The env it returns (even with an error) must be torn down.
func setUp(ctx context.Context, o *options) (*env, error) {
	e := &env{o: o, componentRestarts: map[string]int{}}
	out, err := e.script(ctx, "hack/controlplane/cluster-up.sh", "CLUSTER_NAME="+o.cluster,
		"NODES="+filepath.Join(o.repoRoot, "test", "chaos", "nodes.yaml"))
	e.up = true
	if err != nil {
		return e, fmt.Errorf("cluster-up: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	e.kubeconfig = strings.TrimSpace(lines[len(lines)-1])
	e.clusterDir = filepath.Dir(e.kubeconfig)
	if e.cfg, err = clientcmd.BuildConfigFromFlags("", e.kubeconfig); err != nil {
		return e, err
	}
	e.cfg.QPS, e.cfg.Burst = 100, 200
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), troupev1.AddToScheme(scheme)); err != nil {
		return e, err
	}
	if e.c, err = client.New(e.cfg, client.Options{Scheme: scheme}); err != nil {
		return e, err
	}
	if e.kube, err = kubernetes.NewForConfig(e.cfg); err != nil {
		return e, err
	}
	if out, err := e.kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(o.repoRoot, "config", "crds")); err != nil {
		return e, fmt.Errorf("install CRDs: %w\n%s", err, out)
	}
	if out, err := e.kubectl(ctx, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		return e, fmt.Errorf("CRDs: %w\n%s", err, out)
	}
	if e.fleet, err = newFleet(ctx, o.repoRoot, e.kubeconfig, o.out); err != nil {
		return e, err
	}
	if _, err := e.script(ctx, "hack/webhooks-local.sh "+e.fleet.hookPort(), "KUBECONFIG="+e.kubeconfig); err != nil {
		return e, fmt.Errorf("webhook configuration: %w", err)
	}
	return e, nil
}

// tearDown stops every operator replica the harness started and deletes the cluster (unless
// -keep).
func (e *env) tearDown() {
	if e.fleet != nil {
		e.fleet.close()
	}
	if e.o.keep || !e.up {
		if e.up {
			fmt.Fprintf(os.Stderr, "cluster kept: KUBECONFIG=%s (CLUSTER_NAME=%s hack/controlplane/cluster-down.sh)\n", e.kubeconfig, e.o.cluster)
		}
		return
	}
	if _, err := e.script(context.Background(), "hack/controlplane/cluster-down.sh", "CLUSTER_NAME="+e.o.cluster); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-down:", err)
	}
}

// restartComponent kills one of the cluster's processes (kube-apiserver, etcd) by the PID
// kwokctl recorded for it, after checking that the PID runs that binary, and has kwokctl
// start it again: `kwokctl start cluster` starts the components that are not running, with
// the arguments it made the cluster with. It returns once the API server answers /readyz.
func (e *env) restartComponent(ctx context.Context, name string) (time.Duration, error) {
	e.components.Lock()
	defer e.components.Unlock()
	start := time.Now()
	pidFile := filepath.Join(e.clusterDir, "pids", name+".pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", pidFile, err)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != name {
		return 0, fmt.Errorf("PID %d of %s runs %q, not %s: not touching it", pid, pidFile, exe, name)
	}
	// While the component is down its port is free, and kwokctl, making another cluster on this
	// machine, would hand it out: hold the lock under which cluster-up.sh and cluster-down.sh
	// run until the component listens again.
	unlock, err := lockKwok(ctx, filepath.Join(filepath.Dir(filepath.Dir(e.clusterDir)), ".lock"), 3*time.Minute)
	if err != nil {
		return 0, err
	}
	defer unlock()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill %s (PID %d): %w", name, pid, err)
	}
	// Gone, or a zombie nobody reaps yet with no thread left: either way its sockets are
	// closed. The group leader turns zombie while its other threads may still be exiting, and
	// the process's files (its listening socket) are released only with the last of them: a
	// successor started before then fails to bind the port and exits.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return processExited(pid), nil
	}); err != nil {
		return 0, fmt.Errorf("%s (PID %d) did not exit: %w", name, pid, err)
	}
	// kwokctl takes a PID that answers signal 0 (a zombie does) for a running component.
	_ = os.Remove(pidFile)
	if err := e.kwokctlStart(ctx); err != nil {
		return 0, err
	}
	// A successor that exits anyway (its port still held by a process this harness does not
	// know) is started again, as superviseCluster would, which waits for the lock held here.
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if slices.Contains(e.deadComponents(), pidFile) {
			_ = os.Remove(pidFile)
			e.componentRestarts[name]++
			return false, e.kwokctlStart(ctx)
		}
		return e.waitAPIReady(ctx, 2*time.Second) == nil, nil
	}); err != nil {
		return 0, fmt.Errorf("%s did not serve again: %w", name, err)
	}
	return time.Since(start), nil
}

// processExited reports whether process pid is gone, or is a zombie none of whose threads
// still runs.
func processExited(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true // no such process
	}
	for _, t := range tasks {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue // this thread is gone
		}
		if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			return false
		}
	}
	return true
}

// kwokctlStart has kwokctl start the cluster's components that do not run.
func (e *env) kwokctlStart(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, envOr("KWOKCTL", "kwokctl"), "--name", e.o.cluster, "start", "cluster")
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+filepath.Dir(filepath.Dir(e.clusterDir)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kwokctl start cluster: %w\n%s", err, out)
	}
	return nil
}

// superviseCluster does for the cluster's processes what the kubelet does for a control
// plane's static pods: kube-scheduler and kube-controller-manager exit when they cannot renew
// their leader lease (the API server down more than their renew deadline), and a component
// restarted while its predecessor still held its port exits at once; every 2 s, a component
// whose recorded PID no longer runs is started again by kwokctl (under the machine's kwok
// lock, its port being free meanwhile).
func (e *env) superviseCluster(ctx context.Context, report func(error)) {
	for sleepCtx(ctx, 2*time.Second) {
		dead := e.deadComponents()
		if len(dead) == 0 {
			continue
		}
		e.components.Lock()
		if dead = e.deadComponents(); len(dead) > 0 {
			unlock, err := lockKwok(ctx, filepath.Join(filepath.Dir(filepath.Dir(e.clusterDir)), ".lock"), 3*time.Minute)
			if err == nil {
				for _, pidFile := range dead {
					_ = os.Remove(pidFile)
				}
				err = e.kwokctlStart(ctx)
				unlock()
			}
			if err != nil {
				report(err)
			}
			for _, pidFile := range dead {
				e.componentRestarts[strings.TrimSuffix(filepath.Base(pidFile), ".pid")]++
			}
		}
		e.components.Unlock()
	}
}

// deadComponents are the pid files of the cluster whose process is gone or a zombie.
func (e *env) deadComponents() []string {
	files, _ := filepath.Glob(filepath.Join(e.clusterDir, "pids", "*.pid"))
	var dead []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			dead = append(dead, f)
			continue
		}
		if fields := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X") {
			dead = append(dead, f)
		}
	}
	return dead
}

// lockKwok takes the exclusive flock of path (hack/controlplane's lock), waiting up to
// timeout; it returns the release.
func lockKwok(ctx context.Context, path string, timeout time.Duration) (func(), error) {
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		return err == nil, nil //nolint:nilerr // held by another cluster's script: wait
	})
	if err != nil {
		_ = fh.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = fh.Close() }, nil
}

// waitAPIReady polls the API server's /readyz.
func (e *env) waitAPIReady(ctx context.Context, timeout time.Duration) error {
	rc, err := rest.HTTPClientFor(e.cfg)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(e.cfg.Host, "/")+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := rc.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not serving yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// script runs a repository script (with arguments, split on spaces) with extra environment;
// its stderr goes to the harness's log file, its stdout is returned.
func (e *env) script(ctx context.Context, cmdline string, extraEnv ...string) (string, error) {
	args := strings.Fields(cmdline)
	cmd := exec.CommandContext(ctx, filepath.Join(e.o.repoRoot, args[0]), args[1:]...)
	cmd.Dir = e.o.repoRoot
	cmd.Env = append(os.Environ(), extraEnv...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, e.o.log
	err := cmd.Run()
	return stdout.String(), err
}

func (e *env) kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
