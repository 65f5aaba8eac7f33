// Command controllers measures how fast MPI jobs start and finish on a simulated cluster of its
// own (hack/controlplane/cluster-up.sh), for three sides in turn on the same cluster:
//
//	limit         the objects one MPI job needs (headless Service, hostfile ConfigMap, key
//	              Secret, worker StatefulSet with Parallel pod management, launcher Job) created
//	              straight by a client at the operators' QPS/burst: no operator at all
//	troupe        troupe MPIJobs (1 launcher + W workers) through its webhooks, the operator a
//	              local process as the e2e tests run it
//	mpi-operator  the equivalent kubeflow.org/v2beta1 MPIJobs under kubeflow's mpi-operator,
//	              its work queue's limiter raised as its client's rate is (-mpi-queue-qps)
//
// The sides run interleaved, -repeats rounds of them (default 3), on each cluster profile of
// -profiles in turn (the cluster's own controllers unthrottled, and at Kubernetes' defaults);
// every figure is reported per profile as the median of its runs with their range (min-max),
// and every ratio beside the settings of both its sides. With -troupe-a (and -troupe-b) it
// compares two troupe-operator binaries or git revisions the same way, A and B trading places
// every round, and says for each figure whether the effect exceeds the spread.
//
// Every side's API requests go through a counting proxy, so writes per job are measured the same
// way for all (the operators' client-side view). Launchers are held Running until every pod of
// their side is Running, then all end at once (docs/performance.md says why). It prints a line
// per run, the medians and the ratios, and writes report.txt, CSVs and a plot per profile
// under -out.
//
//	go run ./test/bench/controllers -jobs 200 -workers 8
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	testutil "github.com/troupe-dev/troupe/pkg/testing"
)

// options are the command's flags.
type options struct {
	jobs, workers  int
	qps            float64
	troupeArgs     string
	troupeEnv      []string
	burst          int
	sides          []string
	profiles       []string
	repeats        int
	mpiQueueQPS    int
	mpiQueueBurst  int
	cluster        string
	out            string
	rate           float64
	timeout        time.Duration
	profileSeconds int
	keep           bool
	watchFloor     bool
	repoRoot       string
	// troupeRefs are what each troupe side runs (-troupe-a, -troupe-b): a binary's path or a
	// git revision; "" is this checkout.
	troupeRefs map[string]string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "controllers bench:", err)
		os.Exit(1)
	}
}

func run() error {
	o := options{troupeRefs: map[string]string{}}
	var sides, profiles, troupeA, troupeB string
	flag.IntVar(&o.jobs, "jobs", 200, "MPI jobs per side")
	flag.IntVar(&o.workers, "workers", 8, "workers per job (each job also has 1 launcher)")
	flag.Float64Var(&o.qps, "qps", 50, "client QPS of both operators and of the limit's client (--kube-api-qps; troupe-operator's default)")
	flag.IntVar(&o.burst, "burst", 100, "client burst of both operators and of the limit's client (--kube-api-burst; troupe-operator's default)")
	flag.IntVar(&o.mpiQueueQPS, "mpi-queue-qps", 100, "mpi-operator's --controller-queue-rate-limit (its default 10, raised 10x as its client QPS is, 5 -> 50)")
	flag.IntVar(&o.mpiQueueBurst, "mpi-queue-burst", 1000, "mpi-operator's --controller-queue-burst (its default 100, raised 10x as its client burst is, 10 -> 100)")
	flag.StringVar(&o.troupeArgs, "troupe-args", "", "more flags for troupe-operator, space-separated (e.g. \"--max-concurrent-reconciles 8\")")
	var troupeEnv string
	flag.StringVar(&troupeEnv, "troupe-env", "", "more environment of troupe-operator, space-separated NAME=value (e.g. \"GOMEMLIMIT=200MiB\")")
	flag.StringVar(&sides, "sides", "", "sides to measure, in this order every round (default limit,troupe,mpi-operator; troupe-a,troupe-b with -troupe-a)")
	flag.StringVar(&profiles, "profiles", strings.Join(profileNames, ","), "cluster profiles, one cluster after the other: unthrottled (kube-controller-manager and kube-scheduler without client limits), defaults (Kubernetes' defaults)")
	flag.IntVar(&o.repeats, "repeats", 3, "rounds of the sides on each profile; every figure is the median of its rounds, with their range")
	flag.StringVar(&troupeA, "troupe-a", "", "A/B run: troupe-operator A, a binary's path or a git revision (built from `git archive`); its side is troupe-a")
	flag.StringVar(&troupeB, "troupe-b", "", "A/B run: troupe-operator B, as -troupe-a; default this checkout; its side is troupe-b")
	flag.StringVar(&o.cluster, "cluster", "troupe-bench", "name of the bench's own kwok cluster")
	flag.StringVar(&o.out, "out", "bench-results", "directory for the report, the CSVs, the plots, the logs and the profiles")
	flag.Float64Var(&o.rate, "rate", 0, "jobs created per second (0: as fast as the creating client goes)")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "give up on a side after this long")
	flag.IntVar(&o.profileSeconds, "profile-seconds", 0, "take a CPU profile of troupe-operator this long from its first job, and a heap profile at its end (0: none)")
	flag.BoolVar(&o.keep, "keep", false, "leave the last profile's cluster running at the end")
	flag.BoolVar(&o.watchFloor, "watch-floor", false, "during the troupe side, also run test/bench/watchfloor (troupe's informers alone, no controller) and print its CPU and peak RSS")
	var like string
	flag.StringVar(&like, "limit-like", "", "give the limit's objects these features of troupe's, comma-separated: init, service, policy, netpol, checks (objects.go)")
	flag.Parse()
	o.troupeEnv = strings.Fields(troupeEnv)
	for _, f := range strings.Split(like, ",") {
		switch f {
		case "":
		case "init", "service", "policy", "netpol", "checks":
			limitLike[f] = true
		default:
			return fmt.Errorf("-limit-like: unknown feature %q (want init, service, policy, netpol or checks)", f)
		}
	}
	if troupeA == "" && troupeB != "" {
		return fmt.Errorf("-troupe-b needs -troupe-a")
	}
	if sides == "" {
		sides = "limit,troupe,mpi-operator"
		if troupeA != "" {
			sides = "troupe-a,troupe-b"
		}
	}
	o.sides = strings.Split(sides, ",")
	for _, s := range o.sides {
		if _, ok := sideKinds[s]; !ok {
			return fmt.Errorf("-sides: unknown side %q (want limit, troupe, mpi-operator, troupe-a or troupe-b)", s)
		}
		if (s == "troupe-a" || s == "troupe-b") && troupeA == "" {
			return fmt.Errorf("-sides %s needs -troupe-a", s)
		}
	}
	if troupeA != "" {
		if !slices.Contains(o.sides, "troupe-a") || !slices.Contains(o.sides, "troupe-b") {
			return fmt.Errorf("-troupe-a: -sides must hold troupe-a and troupe-b")
		}
		o.troupeRefs["troupe-a"], o.troupeRefs["troupe-b"] = troupeA, troupeB
	}
	o.profiles = strings.Split(profiles, ",")
	for _, p := range o.profiles {
		if _, ok := clusterProfiles[p]; !ok {
			return fmt.Errorf("-profiles: unknown profile %q (want unthrottled or defaults)", p)
		}
	}
	if o.jobs < 1 || o.workers < 1 || o.repeats < 1 {
		return fmt.Errorf("-jobs, -workers and -repeats must be at least 1")
	}
	if slices.Contains(o.sides, "mpi-operator") && o.qps != float64(int(o.qps)) {
		return fmt.Errorf("-qps %g: mpi-operator takes a whole number", o.qps)
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	o.repoRoot = wd
	if _, err := os.Stat(filepath.Join(wd, "hack", "controlplane", "cluster-up.sh")); err != nil {
		return fmt.Errorf("run it from the repository's root (make bench): %w", err)
	}
	stamp := time.Now().UTC().Format("20060102-150405")
	o.out = filepath.Join(o.out, fmt.Sprintf("%s-%dx%d", stamp, o.jobs, 1+o.workers))
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	rep, err := newReporter(filepath.Join(o.out, "report.txt"))
	if err != nil {
		return err
	}
	defer rep.close()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	e, err := build(ctx, &o)
	if err != nil {
		return err
	}
	rep.printf("bench: %d jobs x (1 launcher + %d workers) per side, sides %s, %d rounds on each of the profiles %s; load average %s",
		o.jobs, o.workers, strings.Join(o.sides, ","), o.repeats, strings.Join(o.profiles, ","), testutil.LoadAverage())
	for _, s := range o.sides {
		rep.printf("settings %-12s %s", s, o.sideSettings(s))
	}
	var results []*result
	// runErr stops the bench; an invalid run (a figure the line marks) fails it at the end, once
	// the other profiles are measured too.
	var runErr, invalid error
	for _, name := range o.profiles {
		p := clusterProfiles[name]
		rep.printf("profile %s: %s", p.name, p.settings)
		runs, err := e.runProfile(ctx, p, rep, func(r *result) error {
			results = append(results, r)
			// After every run, so a later failure leaves the earlier runs' files.
			return writeResults(o.out, results, &o)
		})
		if err := checkValid(runs, o.timeout); err != nil && invalid == nil {
			invalid = fmt.Errorf("profile %s: %w", name, err)
		}
		if err != nil {
			runErr = fmt.Errorf("profile %s: %w", name, err)
			break
		}
	}
	rep.printf("load average after: %s", testutil.LoadAverage())
	summarize(rep, &o, results)
	if err := writeMedians(o.out, results, &o); err != nil && runErr == nil {
		runErr = err
	}
	rep.printf("results: %s", o.out)
	if runErr != nil {
		return runErr
	}
	return invalid
}

// checkValid fails a profile whose runs are not valid figures: a launcher that ended before its
// release, or jobs not final after -timeout.
func checkValid(runs []*result, timeout time.Duration) error {
	for _, r := range runs {
		if r.endedEarly > 0 {
			return fmt.Errorf("%s round %d: %d launchers ended before every pod was Running: the figures are not valid", r.side, r.round, r.endedEarly)
		}
		if r.unfinished > 0 {
			return fmt.Errorf("%s round %d: %d jobs were not final after -timeout %s", r.side, r.round, r.unfinished, timeout)
		}
	}
	return nil
}

// roundOrder is the order of the sides in round (from 1): -sides as given, except that A and B
// of an A/B run trade places every other round, so that a drift of the machine over the run
// does not always favour the one that runs first.
func roundOrder(sides []string, round int) []string {
	order := slices.Clone(sides)
	if round%2 == 0 {
		a, b := slices.Index(order, "troupe-a"), slices.Index(order, "troupe-b")
		if a >= 0 && b >= 0 {
			order[a], order[b] = order[b], order[a]
		}
	}
	return order
}

// runProfile brings up the profile's cluster, measures -repeats rounds of the sides on it, and
// takes the cluster down (also on failure). Each run goes to record as it ends.
func (e *env) runProfile(ctx context.Context, p clusterProfile, rep *reporter, record func(*result) error) ([]*result, error) {
	c, err := e.clusterUp(ctx, p)
	if c != nil {
		defer c.down()
	}
	if err != nil {
		return nil, err
	}
	var runs []*result
	last := e.o.repeats * len(e.o.sides)
	for round := 1; round <= e.o.repeats; round++ {
		for _, side := range roundOrder(e.o.sides, round) {
			res, err := c.measure(ctx, sideKinds[side], runLabel{profile: p.name, round: round}, len(runs) < last-1)
			if err != nil {
				return runs, fmt.Errorf("%s round %d: %w", side, round, err)
			}
			runs = append(runs, res)
			rep.printf("%s", res.line())
			if err := record(res); err != nil {
				return runs, err
			}
		}
	}
	return runs, nil
}
