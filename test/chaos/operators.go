package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// fleet is the operator's replicas, each troupe-operator as a local process (as the e2e suite
// runs it), and the webhook forwarder in front of them.
//
// A webhook configuration names one URL, so the API server calls https://localhost:<port> of
// the forwarder, a TCP pass-through that sends each connection to a replica that accepts it,
// as a Service in front of the Deployment's pods would. Every replica serves the webhooks with
// the certificate of the one Secret (their rotators share it), so TLS ends in whichever replica
// the connection reaches. With one replica and it killed, the forwarder refuses, like a Service
// without endpoints.
type fleet struct {
	bin, kubeconfig, dir string
	// leaderElect: replicas run with --leader-elect (two replicas); without, one replica
	// reconciles alone and a restart is a cold start.
	leaderElect bool

	mu       sync.Mutex
	replicas []*replica
	started  int
	logs     []string
	// exits counts replicas that ended without being killed (a leader that could not renew
	// its lease while the API server was down exits, as controller-runtime's managers do).
	exits int
	// earlyExits counts replicas that exited before they were ready (and were started again).
	earlyExits int

	// ops serializes what changes the set of replicas: kills, starts, the supervisor; down
	// keeps the supervisor from starting replicas (the webhooks-down window).
	ops  sync.Mutex
	down bool

	listener net.Listener
}

type replica struct {
	n            int
	killed       bool
	cmd          *exec.Cmd
	log          string
	hooks, probe string
	metrics      string // its metrics endpoint, host:port
	done         chan struct{}
	// leads: the replica logged taking the lease (it exits if it loses it).
	leads bool
	// reconciling: its log says every kind's controller started its workers (reconciling).
	reconciling bool
}

// newFleet builds troupe-operator and starts the forwarder; HookPort is its port.
func newFleet(ctx context.Context, repoRoot, kubeconfig, dir string) (*fleet, error) {
	f := &fleet{kubeconfig: kubeconfig, dir: dir, bin: filepath.Join(dir, "bin", "troupe-operator")}
	build := exec.CommandContext(ctx, "go", "build", "-o", f.bin, "./cmd/troupe-operator")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build troupe-operator: %w\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.listener = l
	go f.forward()
	return f, nil
}

func (f *fleet) hookPort() string {
	_, port, _ := net.SplitHostPort(f.listener.Addr().String())
	return port
}

// forward passes every connection to a live replica's webhook port.
func (f *fleet) forward() {
	for {
		in, err := f.listener.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = in.Close() }()
			f.mu.Lock()
			var addrs []string
			for _, r := range f.replicas {
				if !r.exited() {
					addrs = append(addrs, r.hooks)
				}
			}
			f.mu.Unlock()
			rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
			for _, a := range addrs {
				out, err := net.DialTimeout("tcp", a, time.Second)
				if err != nil {
					continue
				}
				defer func() { _ = out.Close() }()
				go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(in, out)
				return
			}
		}()
	}
}

// start starts one more replica and waits until it is ready (its webhooks serve).
func (f *fleet) start() error {
	f.mu.Lock()
	f.started++
	n := f.started
	f.mu.Unlock()
	ports := make([]string, 3)
	for i := range ports {
		p, err := testutil.FreePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	r := &replica{n: n, hooks: ports[0], probe: ports[1], metrics: ports[2], done: make(chan struct{}),
		log: filepath.Join(f.dir, fmt.Sprintf("operator-%02d.log", n))}
	logFile, err := os.Create(r.log)
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig", f.kubeconfig, "--metrics-bind-address", ports[2], "--metrics-secure=false",
		"--health-probe-bind-address", r.probe, "--zap-log-level", "2",
		"--webhook-bind-address", r.hooks, "--webhook-dns-name", "localhost",
		"--webhook-cert-dir", filepath.Join(f.dir, fmt.Sprintf("certs-%02d", n)), "--webhook-write-certs"}
	if f.leaderElect {
		args = append(args, "--leader-elect", "--leader-election-namespace", "troupe-system")
	}
	r.cmd = exec.Command(f.bin, args...)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	if err := r.cmd.Start(); err != nil {
		_ = logFile.Close()
		return err
	}
	go func() { _ = r.cmd.Wait(); _ = logFile.Close(); close(r.done) }()
	f.mu.Lock()
	f.replicas = append(f.replicas, r)
	f.logs = append(f.logs, r.log)
	f.mu.Unlock()
	ready := make(chan error, 1)
	go func() { ready <- testutil.WaitReady(r.probe, 200*time.Millisecond, 90*time.Second) }()
	select {
	case err := <-ready:
		if err != nil {
			f.kill(r)
			return fmt.Errorf("operator %d not ready (log %s): %w", n, r.log, err)
		}
		return nil
	case <-r.done:
		f.kill(r) // forget it; not an exit of a running replica
		// It could not start (the API server restarting, say): the caller tries again.
		return fmt.Errorf("operator %d exited while starting (log %s): %w", n, r.log, errExited)
	}
}

// errExited: a replica ended before it was ready.
var errExited = errors.New("exited")

func (r *replica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to the replica (a process this harness started) and waits for it.
func (f *fleet) kill(r *replica) {
	f.mu.Lock()
	r.killed = true
	f.mu.Unlock()
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, x := range f.replicas {
		if x == r {
			f.replicas = append(f.replicas[:i], f.replicas[i+1:]...)
			break
		}
	}
}

// want is how many replicas run: one without leader election, two with.
func (f *fleet) want() int {
	if f.leaderElect {
		return 2
	}
	return 1
}

// ensure starts replicas until want run, trying again for up to two minutes a replica that
// exits while it starts (one that cannot reach the API server); the caller holds ops.
func (f *fleet) ensure() error {
	deadline := time.Now().Add(2 * time.Minute)
	for len(f.live()) < f.want() {
		err := f.start()
		switch {
		case err == nil:
		case errors.Is(err, errExited) && time.Now().Before(deadline):
			f.mu.Lock()
			f.earlyExits++
			f.mu.Unlock()
			time.Sleep(time.Second)
		default:
			return err
		}
	}
	return nil
}

// supervise replaces, as a Deployment's kubelet would, replicas that ended on their own, until
// ctx ends; their errors go to report.
func (f *fleet) supervise(ctx context.Context, report func(error)) {
	for sleepCtx(ctx, time.Second) {
		f.ops.Lock()
		f.mu.Lock()
		kept := f.replicas[:0]
		for _, r := range f.replicas {
			if r.exited() && !r.killed {
				f.exits++
				continue
			}
			kept = append(kept, r)
		}
		f.replicas = kept
		f.mu.Unlock()
		if !f.down {
			if err := f.ensure(); err != nil {
				report(err)
			}
		}
		f.ops.Unlock()
	}
}

// counts are the replicas started and those that ended on their own.
func (f *fleet) counts() (started, exits, earlyExits int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started, f.exits, f.earlyExits
}

// live are the replicas running now.
func (f *fleet) live() []*replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*replica
	for _, r := range f.replicas {
		if !r.exited() {
			out = append(out, r)
		}
	}
	return out
}

// leader is the live replica that logged taking the lease (client-go's leaderelection logs
// "Successfully acquired lease") (nil: none yet). Without leader
// election the one replica leads.
func (f *fleet) leader() *replica {
	live := f.live()
	if !f.leaderElect {
		if len(live) == 1 {
			return live[0]
		}
		return nil
	}
	for _, r := range live {
		if !r.leads && logHas(r.log, "Successfully acquired lease") {
			f.mu.Lock()
			r.leads = true
			f.mu.Unlock()
		}
		if r.leads {
			return r
		}
	}
	return nil
}

// waitLeader waits until a live replica leads, its job controllers run and have caught up
// with the cluster, up to timeout.
func (f *fleet) waitLeader(ctx context.Context, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if l := f.leader(); l != nil && f.reconciling(l) && caughtUp(ctx, l.metrics) {
			return true
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return false
		}
	}
	return false
}

// stopAll kills every live replica (cleanup; only processes this harness started).
func (f *fleet) stopAll() {
	for _, r := range f.live() {
		f.kill(r)
	}
}

func (f *fleet) close() {
	f.stopAll()
	_ = f.listener.Close()
}

// panics counts the lines of every replica's log that tell of a panic: Go's own crash
// ("panic: ") and controller-runtime's recovered one ("Observed a panic").
func (f *fleet) panics() (int, []string) {
	f.mu.Lock()
	logs := append([]string(nil), f.logs...)
	f.mu.Unlock()
	n := 0
	var where []string
	for _, l := range logs {
		c := countLines(l, func(s string) bool {
			return strings.Contains(s, "panic: ") || strings.Contains(s, "Observed a panic")
		})
		if c > 0 {
			where = append(where, fmt.Sprintf("%s (%d)", l, c))
		}
		n += c
	}
	return n, where
}

// reconciling reports whether the replica of log path runs the engine's controller of every
// kind: controller-runtime starts a controller's workers once its caches have synced, so
// from then on a change to a job's child is acted on. A replica that leads but has not got
// there (a cold start still listing the cluster) would make a restore time its start-up time.
func reconciling(path string) bool {
	started := map[string]bool{}
	countLines(path, func(l string) bool {
		if !strings.Contains(l, `"msg":"Starting workers"`) {
			return false
		}
		for _, k := range kindNames() {
			if strings.Contains(l, `"controller":"`+k+`"`) {
				started[k] = true
			}
		}
		return true
	})
	return len(started) == len(kindNames())
}

// reconciling is reconciling(r.log), read from r's log until it is true (it stays true), as
// leader reads the lease line.
func (f *fleet) reconciling(r *replica) bool {
	if !r.reconciling && reconciling(r.log) {
		f.mu.Lock()
		r.reconciling = true
		f.mu.Unlock()
	}
	return r.reconciling
}

// caughtUp reports whether the job controllers of the replica serving metrics at addr have
// nothing queued and no pass running (controller-runtime's workqueue_depth and
// controller_runtime_active_workers, per kind): a replica that has just started its workers
// first passes over every job it finds, and a tampering then would wait behind them all.
func caughtUp(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	seen := map[string]bool{} // metric and kind: the depth may have a line per priority
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		metric, _, ok := strings.Cut(line, "{")
		if !ok || (metric != "workqueue_depth" && metric != "controller_runtime_active_workers") {
			continue
		}
		for _, k := range kindNames() {
			if !strings.Contains(line, `controller="`+k+`"`) {
				continue
			}
			seen[metric+" "+k] = true
			if f := strings.Fields(line); f[len(f)-1] != "0" {
				return false
			}
		}
	}
	return sc.Err() == nil && len(seen) == 2*len(kindNames())
}

func logHas(path, s string) bool {
	return countLines(path, func(l string) bool { return strings.Contains(l, s) }) > 0
}

// linesAbout returns, from every replica's log, the lines logged from a second before from to
// a second after to (the log's times are whole seconds) that name job name, report an error or
// tell of the lease; at most 80, each cut to 400 bytes.
func (f *fleet) linesAbout(name string, from, to time.Time) []string {
	f.mu.Lock()
	logs := append([]string(nil), f.logs...)
	f.mu.Unlock()
	from, to = from.Add(-time.Second).Truncate(time.Second), to.Add(time.Second)
	var out []string
	for _, path := range logs {
		countLines(path, func(l string) bool {
			var entry struct {
				TS    time.Time `json:"ts"`
				Level string    `json:"level"`
			}
			if json.Unmarshal([]byte(l), &entry) != nil || entry.TS.Before(from) || entry.TS.After(to) {
				return false
			}
			if !strings.Contains(l, `"name":"`+name+`"`) && entry.Level != "error" && !strings.Contains(l, "lease") {
				return false
			}
			if len(out) < 80 {
				out = append(out, filepath.Base(path)+": "+l[:min(len(l), 400)])
			}
			return true
		})
	}
	return out
}

func countLines(path string, match func(string) bool) int {
	fh, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer func() { _ = fh.Close() }()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	n := 0
	for sc.Scan() {
		if match(sc.Text()) {
			n++
		}
	}
	return n
}
