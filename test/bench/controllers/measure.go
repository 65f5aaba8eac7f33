package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// result is what one side measured.
type result struct {
	side               string
	jobs, pods         int
	allRunning         time.Duration // first create -> every pod seen Running
	allFinal           time.Duration // first create -> every job seen final
	ttrP50, ttrP99     time.Duration // per job: its create -> its every pod Running
	lagP50, lagP99     time.Duration // per job: launcher pod finished -> job final
	lagParts           lagParts      // the lag's parts, where the operator's final status write was timed
	jcP50, jcP99       time.Duration // per job: launcher pod finished -> its launcher Job Complete (Job controller)
	jcSeen             int           // launcher Jobs seen Complete or Failed
	writes             writeCounts
	profile            string  // the cluster profile it ran on
	round              int     // from 1
	settings           string  // the side's client and work-queue settings (sideSettings)
	cpuSeconds         float64 // operator CPU from first create to every job final; <0 no operator
	passes             float64 // troupe-operator's passes (reconciles, every kind) over the same time; <0 unknown
	passesDetail       string  // the passes by controller and result ("MPIJob success 1800, MPIJob requeue_after 300")
	wakeupsDetail      string  // the passes its watches asked for, by job kind and the kind of object whose event asked ("MPIJob Pod 1600")
	kcmCPUSeconds      float64 // kube-controller-manager's CPU over the same time; <0 unknown
	clusterCPUSeconds  float64 // the simulated cluster's processes' CPU (kcmCPUSeconds among them); <0 unknown
	machineCPUSeconds  float64 // the whole machine's busy CPU time (/proc/stat) over the same time; <0 unknown
	kcmQueues          string  // kube-controller-manager's busiest work queues over the same time (busiestQueues)
	peakRSS            int64   // operator VmHWM, bytes
	fileRSS            int64   // operator RssFile at the end: its binary's pages in memory, which peakRSS counts and GOMEMLIMIT does not
	floorCPUSeconds    float64 // -watch-floor: the watchfloor process's CPU over the same time; <0 none
	floorPeakRSS       int64   // -watch-floor: its VmHWM, bytes
	endedEarly         int     // launchers that ended before every pod was Running (must be 0)
	unfinished         int     // jobs not final when -timeout ended the wait
	timeline           []sample
	startedLaunchersAt time.Duration // when the launchers were released
}

type sample struct {
	at             time.Duration
	running, final int
}

const pollEvery = 250 * time.Millisecond

// runLabel names one run of a side: its profile and round.
type runLabel struct {
	profile string
	round   int
}

// file is the name of one of the run's files: profile-rN-side.suffix.
func (l runLabel) file(side, suffix string) string {
	return fmt.Sprintf("%s-r%d-%s%s", l.profile, l.round, side, suffix)
}

// measure runs one side: a fresh namespace, its operator (if any), N jobs, the wait for every
// pod Running, the launchers' release, the wait for every job final.
// With cleanUp it then deletes the namespace, operator still running (its finalizers), so the
// next side starts on an empty cluster.
func (e *cluster) measure(ctx context.Context, k sideKind, run runLabel, cleanUp bool) (*result, error) {
	o := e.o
	ns := "bench-" + k.name
	if err := e.freshNamespace(ctx, ns); err != nil {
		return nil, err
	}
	// The run itself has -timeout; what follows it (profiles, clean-up) has the caller's ctx.
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	tr, err := newTracker(ctx, e.dyn, ns, k.job, k.final, o.workers)
	if err != nil {
		return nil, err
	}
	proc, ends, err := e.startOperator(ctx, k.name, run)
	if err != nil {
		return nil, err
	}
	if proc != nil {
		defer proc.stop()
	}

	creator := e.dyn
	if k.throttled {
		// The limit's client is the operator here: through the proxy, at the operators' rate.
		cfg, err := e.proxyConfig()
		if err != nil {
			return nil, err
		}
		if creator, err = dynamic.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	floor, err := e.startWatchFloor(ctx, k.name, run)
	if err != nil {
		return nil, err
	}
	if floor != nil {
		defer floor.stop()
	}
	res := &result{side: k.name, profile: run.profile, round: run.round, settings: o.sideSettings(k.name),
		jobs: o.jobs, pods: o.jobs * (1 + o.workers), cpuSeconds: -1, floorCPUSeconds: -1, kcmCPUSeconds: -1,
		clusterCPUSeconds: -1, machineCPUSeconds: -1, passes: -1}
	e.proxy.reset()
	// The cluster shares the machine with the side: what each side costs the cluster and the
	// machine says whether the machine's cores, not the side's own work, set the pace.
	clusterPIDs := e.clusterPIDs()
	clusterCPU0 := map[string]float64{}
	for name, pid := range clusterPIDs {
		clusterCPU0[name] = cpuSeconds(pid)
	}
	machineCPU0 := machineBusySeconds()
	kcmMetrics := kcmMetricsURL(clusterPIDs["kube-controller-manager"])
	kcmQueues0 := readQueueWork(ctx, kcmMetrics)
	var cpu0, floorCPU0 float64
	if proc != nil {
		cpu0 = cpuSeconds(proc.cmd.Process.Pid)
	}
	passesBy0 := readLabelledCounts(ctx, ends.passesURL(), "controller_runtime_reconcile_total", "controller", "result")
	wakeupsBy0 := readLabelledCounts(ctx, ends.passesURL(), "troupe_wakeups_total", "kind", "source")
	if floor != nil {
		floorCPU0 = cpuSeconds(floor.cmd.Process.Pid)
	}
	start := time.Now()
	var profiles sync.WaitGroup
	if ends.pprof != "" && o.profileSeconds > 0 {
		profiles.Go(func() {
			save(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", ends.pprof, o.profileSeconds),
				filepath.Join(o.out, run.file(k.name, "-cpu.pprof")))
		})
	}
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			running, final := tr.counts()
			res.timeline = append(res.timeline, sample{at: time.Since(start), running: running, final: final})
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	})
	defer func() {
		select {
		case <-stopSampling:
		default:
			close(stopSampling)
		}
		sampling.Wait()
	}()

	created, createErr := e.createJobs(ctx, creator, k, ns)
	if createErr != nil {
		return nil, createErr
	}
	if err := waitFor(ctx, func() bool { r, _ := tr.counts(); return r >= res.pods }); err != nil {
		r, f := tr.counts()
		return nil, fmt.Errorf("%d of %d pods Running, %d jobs final after %s (log: %s): %w", r, res.pods, f, o.timeout, e.o.out, err)
	}
	res.allRunning = time.Since(start)
	res.startedLaunchersAt = res.allRunning
	if err := e.releaseLaunchers(ctx, ns, tr.release()); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, func() bool { _, f := tr.counts(); return f >= o.jobs }); err != nil {
		if outer.Err() != nil {
			return nil, err
		}
		// Every pod ran but not every job was reported final in time: a figure too (the
		// line says how many were missing), not a reason to lose the other sides'.
		_, f := tr.counts()
		res.unfinished = o.jobs - f
	}
	ctx = outer
	res.allFinal = time.Since(start)
	if len(clusterPIDs) > 0 {
		res.clusterCPUSeconds = 0
		for name, pid := range clusterPIDs {
			used := cpuSeconds(pid) - clusterCPU0[name]
			res.clusterCPUSeconds += used
			if name == "kube-controller-manager" {
				res.kcmCPUSeconds = used
			}
		}
	}
	res.kcmQueues = busiestQueues(kcmQueues0, readQueueWork(ctx, kcmMetrics), 6)
	if machineCPU0 >= 0 {
		if now := machineBusySeconds(); now >= 0 {
			res.machineCPUSeconds = now - machineCPU0
		}
	}
	if proc != nil {
		if proc.exited() {
			return nil, fmt.Errorf("%s exited during the run (log %s)", k.name, proc.log.Name())
		}
		res.cpuSeconds = cpuSeconds(proc.cmd.Process.Pid) - cpu0
		passesBy := readLabelledCounts(ctx, ends.passesURL(), "controller_runtime_reconcile_total", "controller", "result")
		if passesBy0 != nil && passesBy != nil {
			res.passes = passesBy.total() - passesBy0.total()
		}
		res.passesDetail = countsBetween(passesBy0, passesBy)
		res.wakeupsDetail = countsBetween(wakeupsBy0, readLabelledCounts(ctx, ends.passesURL(), "troupe_wakeups_total", "kind", "source"))
		res.peakRSS = peakRSS(proc.cmd.Process.Pid)
		res.fileRSS = statusBytes(proc.cmd.Process.Pid, "RssFile:")
		if floor != nil && !floor.exited() {
			res.floorCPUSeconds = cpuSeconds(floor.cmd.Process.Pid) - floorCPU0
			res.floorPeakRSS = peakRSS(floor.cmd.Process.Pid)
		}
		if ends.pprof != "" && o.profileSeconds > 0 {
			profiles.Wait()
			save(ctx, "http://"+ends.pprof+"/debug/pprof/heap", filepath.Join(o.out, run.file(k.name, "-heap.pprof")))
		}
	}
	close(stopSampling)
	sampling.Wait()
	running, final := tr.counts()
	res.timeline = append(res.timeline, sample{at: res.allFinal, running: running, final: final})
	statusWrites := e.proxy.takeStatusWrites()
	res.writes = splitWrites(e.proxy.reset())
	// An operator may report a job final before the Job controller gives its launcher Job's
	// verdict (troupe does when the launcher's success is certain): wait a while for those, to
	// time the Job controller on every job. Nothing here is counted in the figures above.
	jcCtx, jcCancel := context.WithTimeout(ctx, 2*time.Minute)
	_ = waitFor(jcCtx, func() bool { return tr.launcherJobsDone() >= o.jobs })
	jcCancel()
	res.jcSeen = tr.launcherJobsDone()

	tr.mu.Lock()
	res.endedEarly = tr.releasedAfter
	var ttr, lag, jc []time.Duration
	for job, at := range created {
		if j, ok := tr.launcherJobDone[job]; ok {
			if d, ok := tr.launcherDone[job]; ok {
				jc = append(jc, j.Sub(d))
			}
		}
		if r, ok := tr.jobRunning[job]; ok {
			ttr = append(ttr, r.Sub(at))
		}
		if f, ok := tr.jobFinal[job]; ok {
			if d, ok := tr.launcherDone[job]; ok {
				lag = append(lag, f.Sub(d))
			}
		}
	}
	res.lagParts = statusLagParts(start, tr.launcherDone, tr.jobFinal, statusWrites)
	tr.mu.Unlock()
	res.ttrP50, res.ttrP99 = percentiles(ttr)
	res.lagP50, res.lagP99 = percentiles(lag)
	res.jcP50, res.jcP99 = percentiles(jc)
	if cleanUp {
		if err := e.deleteNamespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// operatorEndpoints are troupe-operator's pprof and metrics addresses (host:port); "" for a side
// without them.
type operatorEndpoints struct{ pprof, metrics string }

// passesURL is where the operator counts its passes (controller_runtime_reconcile_total); "" if
// it does not serve them.
func (ends operatorEndpoints) passesURL() string {
	if ends.metrics == "" {
		return ""
	}
	return "http://" + ends.metrics + "/metrics"
}

// startOperator starts the side's operator through the counting proxy and waits until it
// serves; the limit has none. It returns troupe-operator's pprof and metrics addresses.
func (e *cluster) startOperator(ctx context.Context, side string, run runLabel) (*process, operatorEndpoints, error) {
	var none operatorEndpoints
	o := e.o
	qps, burst := formatQPS(o.qps), strconv.Itoa(o.burst)
	switch {
	case isTroupe(side):
		kc, err := e.proxyKubeconfig(side)
		if err != nil {
			return nil, none, err
		}
		probe, err := testutil.FreePort()
		if err != nil {
			return nil, none, err
		}
		pprofAddr, err := testutil.FreePort()
		if err != nil {
			return nil, none, err
		}
		// Metrics in plain HTTP on loopback: the bench reads its passes from them.
		metricsAddr, err := testutil.FreePort()
		if err != nil {
			return nil, none, err
		}
		args := append([]string{"--kubeconfig", kc, "--metrics-bind-address", metricsAddr, "--metrics-secure=false",
			"--health-probe-bind-address", probe, "--pprof-bind-address", pprofAddr,
			"--kube-api-qps", qps, "--kube-api-burst", burst,
			"--webhook-bind-address", "127.0.0.1:" + e.hookPort, "--webhook-dns-name", "localhost",
			"--webhook-cert-dir", filepath.Join(o.out, "certs"), "--webhook-write-certs"},
			strings.Fields(o.troupeArgs)...)
		p, err := e.start(run.file(side, ""), o.troupeEnv, e.troupeBins[side], args...)
		if err != nil {
			return nil, none, err
		}
		err = waitFor(ctx, func() bool { return !p.exited() && httpOK("http://"+probe+"/readyz") })
		if err == nil {
			// The webhooks serve once the operator has written its certificate and the CA
			// bundle: a dry-run create goes through them.
			err = e.webhooksServe(ctx)
		}
		if err != nil {
			p.stop()
			return nil, none, fmt.Errorf("troupe-operator not ready (log %s): %w", p.log.Name(), err)
		}
		return p, operatorEndpoints{pprof: pprofAddr, metrics: metricsAddr}, nil
	case side == "mpi-operator":
		kc, err := e.proxyKubeconfig(side)
		if err != nil {
			return nil, none, err
		}
		lockNS := "bench-mpi-operator-lock"
		if err := e.freshNamespace(ctx, lockNS); err != nil {
			return nil, none, err
		}
		// It serves /healthz on :8080, a port it does not let one choose.
		p, err := e.start(run.file(side, ""), nil, e.mpiOp, "--kubeConfig", kc, "--kube-api-qps", qps, "--kube-api-burst", burst,
			"--controller-queue-rate-limit", strconv.Itoa(o.mpiQueueQPS), "--controller-queue-burst", strconv.Itoa(o.mpiQueueBurst),
			"--lock-namespace", lockNS, "--monitoring-port", "0")
		if err != nil {
			return nil, none, err
		}
		// Ready once it leads (it starts its controller then).
		err = waitFor(ctx, func() bool {
			if p.exited() {
				return true
			}
			l, err := e.kube.CoordinationV1().Leases(lockNS).Get(ctx, "mpi-operator", metav1.GetOptions{})
			return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
		})
		if err == nil && p.exited() {
			err = fmt.Errorf("it exited")
		}
		if err != nil {
			p.stop()
			return nil, none, fmt.Errorf("mpi-operator not ready (log %s): %w", p.log.Name(), err)
		}
		return p, none, nil
	}
	return nil, none, nil
}

// startWatchFloor starts test/bench/watchfloor (-watch-floor) for the troupe side, straight to
// the API server (its lists and watches are not troupe's requests), and waits until its
// informers have synced; nil for other sides or without the flag.
func (e *cluster) startWatchFloor(ctx context.Context, side string, run runLabel) (*process, error) {
	if e.floor == "" || !isTroupe(side) {
		return nil, nil
	}
	ready := filepath.Join(e.o.out, "watchfloor.synced")
	_ = os.Remove(ready)
	p, err := e.start(run.file("watchfloor", ""), []string{"KUBECONFIG=" + e.kubeconfig}, e.floor, "-ready-file", ready)
	if err != nil {
		return nil, err
	}
	err = waitFor(ctx, func() bool { _, err := os.Stat(ready); return err == nil || p.exited() })
	if err == nil && p.exited() {
		err = fmt.Errorf("it exited")
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("watchfloor did not sync (log %s): %w", p.log.Name(), err)
	}
	return p, nil
}

// webhooksServe waits until a dry-run MPIJob create passes troupe's webhooks.
func (e *cluster) webhooksServe(ctx context.Context) error {
	u := troupeObjects("default", "webhook-probe", 1)[0]
	return waitFor(ctx, func() bool {
		_, err := e.dyn.Resource(troupeJobs).Namespace("default").Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})
}

// createJobs creates the side's jobs, 32 at a time (or at -rate a second), and returns when
// each job's create began.
func (e *cluster) createJobs(ctx context.Context, c dynamic.Interface, k sideKind, ns string) (map[string]time.Time, error) {
	o := e.o
	created := make(map[string]time.Time, o.jobs)
	var mu sync.Mutex
	var firstErr error
	names := make(chan string)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for name := range names {
				at := time.Now()
				mu.Lock()
				created[name] = at
				mu.Unlock()
				for _, u := range k.objects(ns, name, o.workers) {
					err := error(nil)
					if k.name == "limit" {
						err = checkBeforeCreate(ctx, c, u, name)
					}
					if err == nil {
						err = createObject(ctx, c, u)
					}
					if err != nil && !apierrors.IsAlreadyExists(err) {
						mu.Lock()
						if firstErr == nil {
							firstErr = fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
						}
						mu.Unlock()
					}
				}
			}
		})
	}
	var tick <-chan time.Time
	if o.rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
		defer t.Stop()
		tick = t.C
	}
	for i := range o.jobs {
		if tick != nil && i > 0 {
			<-tick
		}
		names <- fmt.Sprintf("job-%04d", i)
	}
	close(names)
	wg.Wait()
	return created, firstErr
}

// releaseLaunchers sets every held launcher's run time to end one second from now, so all end
// together: the launchers ran until every pod of the side was Running.
func (e *cluster) releaseLaunchers(ctx context.Context, ns string, pods []string) error {
	at := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, simDuration, at))
	names := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 32 {
		wg.Go(func() {
			for n := range names {
				_, err := e.kube.CoreV1().Pods(ns).Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range pods {
		names <- n
	}
	close(names)
	wg.Wait()
	return firstErr
}

// freshNamespace deletes ns if it exists (a previous run's), waits until it is gone, and makes
// it anew, with its default ServiceAccount (pods are refused before it exists).
func (e *cluster) freshNamespace(ctx context.Context, ns string) error {
	if err := e.deleteNamespace(ctx, ns); err != nil {
		return err
	}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	return waitFor(ctx, func() bool {
		_, err := e.kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
}

// deleteNamespace deletes ns, if it exists, and waits until it is gone: as long as a side may
// take (-timeout, at least 10 minutes), since the cluster's garbage collector deletes a
// side's children and pods one by one (1,000 jobs' 15,000 objects took over 10 minutes on a
// loaded machine, 29 Nov 2026), and the next side must not start beside the deletion.
func (e *cluster) deleteNamespace(ctx context.Context, ns string) error {
	nsc := e.kube.CoreV1().Namespaces()
	if err := nsc.Delete(ctx, ns, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, max(10*time.Minute, e.o.timeout), true, func(ctx context.Context) (bool, error) {
		_, err := nsc.Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s still there: %w", ns, err)
	}
	return nil
}

func (e *cluster) proxyConfig() (*rest.Config, error) {
	kc, err := e.proxyKubeconfig("limit")
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(e.o.qps), e.o.burst
	return cfg, nil
}

func waitFor(ctx context.Context, cond func() bool) error {
	return wait.PollUntilContextCancel(ctx, pollEvery, true, func(context.Context) (bool, error) { return cond(), nil })
}

func httpOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// save writes what url answers to path (a profile); a failure is reported and the bench goes on.
func save(ctx context.Context, url, path string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err == nil {
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err == nil {
			defer func() { _ = resp.Body.Close() }()
			var f *os.File
			if f, err = os.Create(path); err == nil {
				_, err = io.Copy(f, resp.Body)
				_ = f.Close()
			}
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile %s: %v\n", url, err)
	}
}

// cpuSeconds is the user+system CPU time of pid so far (/proc/PID/stat, in clock ticks of
// 1/100 s, the value of USER_HZ on Linux).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// machineBusyPercent is how much of the machine's cores the run kept busy, from its first
// create to every job final; ok false when the machine's CPU is unknown.
func (r *result) machineBusyPercent() (busy float64, ok bool) {
	if r.machineCPUSeconds < 0 || r.allFinal <= 0 {
		return 0, false
	}
	return 100 * r.machineCPUSeconds / (float64(runtime.NumCPU()) * r.allFinal.Seconds()), true
}

// machineBusySeconds is the CPU time the whole machine has spent busy since it started, every
// core's (/proc/stat: user, nice, system, irq, softirq, steal; not idle or iowait); <0 when it
// cannot be read.
func machineBusySeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	var busy float64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return -1
		}
		busy += v
	}
	return busy / 100
}

// peakRSS is pid's peak resident set size (VmHWM), in bytes.
func peakRSS(pid int) int64 { return statusBytes(pid, "VmHWM:") }

// statusBytes is the field of /proc/<pid>/status named by prefix (a size in kB), in bytes; 0
// when unknown.
func statusBytes(pid int, prefix string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	at := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return at(0.50), at(0.99)
}
