// Command chaos runs troupe jobs of every kind twice on a simulated cluster of its own
// (hack/controlplane/cluster-up.sh): once undisturbed, to record each job's final phase, and
// once, with the same specs, while the operator is killed with SIGKILL (one replica, cold
// starts; then two under leader election, the standby taking over), kube-apiserver and etcd
// are restarted, the webhooks are down for a while and the jobs' children are tampered with.
// It then counts what must be zero: jobs whose final phase differs, jobs never final,
// duplicate launchers, orphans and operator panics; and the time the operator took to restore
// tampered children. The last line it prints is the summary; it exits 1 when a count is not
// met. docs/reliability.md says what is promised and how this tests it.
//
//	go run ./test/chaos -jobs 100 -kills 50
package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// options are the command's flags.
type options struct {
	jobs, kills                  int
	apiserverRestarts, etcdRests int
	webhookDown                  time.Duration
	seed                         uint64
	window, minRun, maxRun       time.Duration
	timeout                      time.Duration
	cluster, out                 string
	keep                         bool
	repoRoot                     string
	log                          *os.File
}

func main() {
	code, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run() (int, error) {
	var o options
	if err := newFlags(&o).Parse(os.Args[1:]); err != nil {
		return 0, err
	}
	if o.jobs < 1 || o.kills < 0 || o.minRun <= 0 || o.maxRun < o.minRun {
		return 0, fmt.Errorf("-jobs must be at least 1, -kills not negative, 0 < -min-run <= -max-run")
	}
	wd, err := os.Getwd()
	if err != nil {
		return 0, err
	}
	o.repoRoot = wd
	if _, err := os.Stat(filepath.Join(wd, "hack", "controlplane", "cluster-up.sh")); err != nil {
		return 0, fmt.Errorf("run it from the repository's root (make chaos): %w", err)
	}
	o.out = filepath.Join(o.out, time.Now().UTC().Format("20060102-150405")+"-"+o.cluster)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return 0, err
	}
	if o.log, err = os.Create(filepath.Join(o.out, "harness.log")); err != nil {
		return 0, err
	}
	defer func() { _ = o.log.Close() }()
	// client-go's complaints while the API server restarts, and controller-runtime's client's
	// (API warnings), go to the log, not between the harness's lines.
	klog.LogToStderr(false)
	klog.SetOutput(o.log)
	ctrllog.SetLogger(klog.NewKlogr())

	// Ctrl-C or SIGTERM cancels the run; the deferred tearDown then stops the operator's
	// replicas (by their PIDs) and deletes the cluster. -timeout bounds the whole run.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelRun := context.WithTimeout(ctx, o.timeout)
	defer cancelRun()
	began := time.Now()
	fmt.Printf("chaos: %d jobs, %d kills, %d kube-apiserver and %d etcd restarts, webhooks down %s, seed %d, load average %s; files in %s\n",
		o.jobs, o.kills, o.apiserverRestarts, o.etcdRests, o.webhookDown, o.seed, testutil.LoadAverage(), o.out)
	e, err := setUp(ctx, &o)
	if e != nil {
		defer e.tearDown()
	}
	if err != nil {
		return 0, err
	}
	if err := e.fleet.start(); err != nil {
		return 0, err
	}
	// The supervisors stop before the teardown (deferred later, so run earlier).
	supCtx, stopSupervisors := context.WithCancel(ctx)
	defer stopSupervisors()
	var supervisorErrs atomic.Int32
	go e.fleet.supervise(supCtx, func(err error) {
		supervisorErrs.Add(1)
		fmt.Println("chaos: operator replica:", err)
	})
	go e.superviseCluster(supCtx, func(err error) {
		supervisorErrs.Add(1)
		fmt.Println("chaos: cluster component:", err)
	})
	fmt.Printf("chaos: cluster %s and operator up in %.0f s\n", o.cluster, time.Since(began).Seconds())

	plan := shapes(o.seed, o.jobs, o.window, o.minRun, o.maxRun)
	bound := o.window + o.maxRun + 4*time.Minute

	// Run 1: no faults.
	calm, calmWatch, err := e.pass(ctx, "chaos-calm", plan, bound, nil, nil)
	if err != nil {
		return 0, err
	}
	fmt.Println(passLine("run 1, no faults", calm))

	// Run 2: the same jobs under faults.
	rng := rand.New(rand.NewPCG(o.seed, 42))
	rep := &faultReport{}
	fp := faultPlan{kills: o.kills, apiserverRestarts: o.apiserverRestarts, etcdRestarts: o.etcdRests,
		webhookDown: o.webhookDown, tampers: o.jobs / 4, window: o.window + o.maxRun}
	faultsDone := make(chan struct{})
	var faulty *pass
	var faultyWatch *launcherWatch
	faulty, faultyWatch, err = e.pass(ctx, "chaos-faults", plan, bound+fp.window, func(ctx context.Context, p *pass) {
		go func() {
			defer close(faultsDone)
			e.injectFaults(ctx, p, fp, rng, rep)
		}()
	}, e.foreignBefore("chaos-faults", rep))
	if err != nil {
		return 0, err
	}
	<-faultsDone
	fmt.Println(passLine("run 2, faults", faulty))
	fmt.Println(rep.line())
	for _, ev := range rep.timelineLines() {
		fmt.Println("chaos: fault", ev)
	}
	for _, st := range rep.slow {
		fmt.Printf("chaos: the operator's log around the slow restore of %s (%s to %s):\n", st.name,
			st.from.UTC().Format(time.TimeOnly), st.to.UTC().Format(time.TimeOnly))
		for _, l := range e.fleet.linesAbout(st.name, st.from, st.to) {
			fmt.Println("chaos:   ", l)
		}
	}
	started, exits, early := e.fleet.counts()
	fmt.Printf("chaos: operator replicas started %d; ended on their own %d (a leader that cannot renew its lease exits), %d while starting (the API server down)\n",
		started, exits, early)
	e.components.Lock()
	fmt.Printf("chaos: cluster components that exited and were started again: %v\n", e.componentRestarts)
	e.components.Unlock()
	for _, err := range rep.errs {
		fmt.Println("chaos: fault error:", err)
	}

	// Checks.
	s := summary{jobs: o.jobs, kills: rep.kills}
	for _, name := range sortedNames(faulty) {
		c, f := calm.jobs[name], faulty.jobs[name]
		if c.phase != c.shape.want() {
			s.calmWrong++
			fmt.Printf("chaos: %s %s ended %q without faults, want %s\n", c.shape.Kind, name, c.phase, c.shape.want())
		}
		if f.final.IsZero() {
			s.unfinished++
			fmt.Printf("chaos: %s %s never final under faults (phase %q) %v\n", f.shape.Kind, name, f.phase, f.errs)
			continue
		}
		if f.phase != c.phase {
			s.differing++
			fmt.Printf("chaos: %s %s ended %s under faults, %s without\n", f.shape.Kind, name, f.phase, c.phase)
		}
	}
	var kube int
	s.duplicates, kube = duplicates(calm, calmWatch, faulty, faultyWatch, rep.tampers, e.jobControllerDeletions(ctx, faulty.ns), rep.duringRestart)
	if kube > 0 {
		fmt.Printf("chaos: launcher pods the Job controller made twice (an API server restart lost a create's answer; it removed one, or the second came during the restart): %d\n", kube)
	}
	orph, err := settledOrphans(ctx, e.c, faulty.ns, 90*time.Second)
	if err != nil {
		fmt.Println("chaos: orphan check:", err)
		s.orphans = -1
	} else {
		s.orphans = len(orph)
		for _, o := range orph {
			fmt.Println("chaos: orphan:", o)
		}
	}
	var where []string
	s.panics, where = e.fleet.panics()
	for _, w := range where {
		fmt.Println("chaos: panic in", w)
	}
	s.tamper(rep)
	fmt.Printf("chaos: ran %.0f s, load average %s\n", time.Since(began).Seconds(), testutil.LoadAverage())
	problems := s.problems(o, rep)
	if n := supervisorErrs.Load(); n > 0 {
		problems = append(problems, fmt.Sprintf("%d operator replicas or cluster components failed to start", n))
	}
	if len(problems) > 0 {
		fmt.Println("chaos: FAIL:", strings.Join(problems, "; "))
	}
	// The summary is the last line.
	fmt.Println(s.line())
	if len(problems) > 0 {
		return 1, nil
	}
	return 0, nil
}

// pass runs the plan in a new namespace ns, watching its launchers; during, if set, is
// called once the pass has started (the faulty run starts its faults there).
func (e *env) pass(ctx context.Context, ns string, plan []shape, bound time.Duration, during func(context.Context, *pass),
	before func(ctx context.Context, s shape) func(context.Context)) (*pass, *launcherWatch, error) {
	if err := e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, nil, fmt.Errorf("namespace %s: %w", ns, err)
	}
	w, err := watchLaunchers(ctx, e.kube, ns)
	if err != nil {
		return nil, nil, err
	}
	p := newPass(e.c, ns, plan)
	if during != nil {
		during(ctx, p)
	}
	p.run(ctx, bound, before)
	return p, w, ctx.Err()
}

// jobControllerDeletions reads the Job controller's SuccessfulDelete events of ns ("Deleted pod:
// <name>" on the Job) and tells whether it deleted pod of Job job.
func (e *env) jobControllerDeletions(ctx context.Context, ns string) func(job, pod string) bool {
	deleted := map[string]bool{}
	var events corev1.EventList
	if err := e.c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		fmt.Println("chaos: events:", err)
	}
	for _, ev := range events.Items {
		if ev.Reason == "SuccessfulDelete" && ev.InvolvedObject.Kind == "Job" {
			if pod, ok := strings.CutPrefix(ev.Message, "Deleted pod: "); ok {
				deleted[ev.InvolvedObject.Name+"/"+pod] = true
			}
		}
	}
	return func(job, pod string) bool { return deleted[job+"/"+pod] }
}
