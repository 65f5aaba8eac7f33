// Command controllers measures how fast MPI jobs start and finish on one simulated cluster
// (hack/controlplane/cluster-up.sh, its own, with the cluster's controllers unthrottled), for
// three sides one after the other:
//
//	limit         the objects one MPI job needs (headless Service, hostfile ConfigMap, key
//	              Secret, worker StatefulSet with Parallel pod management, launcher Job) created
//	              straight by a client at the operators' QPS/burst: no operator at all
//	troupe        troupe MPIJobs (1 launcher + W workers) through its webhooks, the operator a
//	              local process as the e2e tests run it
//	mpi-operator  the equivalent kubeflow.org/v2beta1 MPIJobs under kubeflow's mpi-operator
//
// Every side's API requests go through a counting proxy, so writes per job are measured the same
// way for all three (the operators' client-side view). Launchers are held Running until every
// pod of their side is Running, then all end at once (docs/performance.md says why). It prints
// one line per side and the ratios of the time to every pod Running, and writes a CSV and a PNG
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
	cluster        string
	out            string
	rate           float64
	timeout        time.Duration
	profileSeconds int
	keep           bool
	watchFloor     bool
	repoRoot       string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "controllers bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var o options
	var sides string
	flag.IntVar(&o.jobs, "jobs", 200, "MPI jobs per side")
	flag.IntVar(&o.workers, "workers", 8, "workers per job (each job also has 1 launcher)")
	flag.Float64Var(&o.qps, "qps", 50, "client QPS of both operators and of the limit's client (--kube-api-qps; troupe-operator's default)")
	flag.IntVar(&o.burst, "burst", 100, "client burst of both operators and of the limit's client (--kube-api-burst; troupe-operator's default)")
	flag.StringVar(&o.troupeArgs, "troupe-args", "", "more flags for troupe-operator, space-separated (e.g. \"--max-concurrent-reconciles 8\")")
	var troupeEnv string
	flag.StringVar(&troupeEnv, "troupe-env", "", "more environment of troupe-operator, space-separated NAME=value (e.g. \"GOMEMLIMIT=200MiB\")")
	flag.StringVar(&sides, "sides", "limit,troupe,mpi-operator", "sides to measure, in this order")
	flag.StringVar(&o.cluster, "cluster", "troupe-bench", "name of the bench's own kwok cluster")
	flag.StringVar(&o.out, "out", "bench-results", "directory for the CSV, the plot, the logs and the profiles")
	flag.Float64Var(&o.rate, "rate", 0, "jobs created per second (0: as fast as the creating client goes)")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "give up on a side after this long")
	flag.IntVar(&o.profileSeconds, "profile-seconds", 0, "take a CPU profile of troupe-operator this long from its first job, and a heap profile at its end (0: none)")
	flag.BoolVar(&o.keep, "keep", false, "leave the cluster running at the end")
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
	o.sides = strings.Split(sides, ",")
	for _, s := range o.sides {
		if _, ok := sideKinds[s]; !ok {
			return fmt.Errorf("-sides: unknown side %q (want limit, troupe or mpi-operator)", s)
		}
	}
	if o.jobs < 1 || o.workers < 1 {
		return fmt.Errorf("-jobs and -workers must be at least 1")
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

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	env, err := setUp(ctx, &o)
	if env != nil {
		defer env.tearDown()
	}
	if err != nil {
		return err
	}

	fmt.Printf("bench: %d jobs x (1 launcher + %d workers) per side, client QPS %g burst %d, load average %s\n",
		o.jobs, o.workers, o.qps, o.burst, testutil.LoadAverage())
	var results []*result
	for i, name := range o.sides {
		res, err := env.measure(ctx, sideKinds[name], i < len(o.sides)-1)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Println(res.line())
		results = append(results, res)
		// After every side, so a later side's failure leaves the earlier ones' files.
		if err := writeResults(o.out, results); err != nil {
			return err
		}
	}
	fmt.Printf("load average after: %s\n", testutil.LoadAverage())
	byName := map[string]*result{}
	for _, r := range results {
		byName[r.side] = r
	}
	if t := byName["troupe"]; t != nil {
		for _, other := range []string{"limit", "mpi-operator"} {
			if r := byName[other]; r != nil && r.allRunning > 0 && t.allRunning > 0 {
				fmt.Printf("ratio troupe/%s: %.2f\n", other, t.allRunning.Seconds()/r.allRunning.Seconds())
			}
		}
	}
	fmt.Printf("results: %s\n", o.out)
	for _, r := range results {
		if r.endedEarly > 0 {
			return fmt.Errorf("%s: %d launchers ended before every pod was Running: the figures are not valid", r.side, r.endedEarly)
		}
		if r.unfinished > 0 {
			return fmt.Errorf("%s: %d jobs were not final after -timeout %s", r.side, r.unfinished, o.timeout)
		}
	}
	return nil
}
