package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

func newFlags(o *options) *flag.FlagSet {
	fs := flag.CommandLine
	fs.IntVar(&o.jobs, "jobs", 100, "jobs per run (the three kinds in turn)")
	fs.IntVar(&o.kills, "kills", 50, "SIGKILLs of the operator in the faulty run: the first half to one replica, the rest to one of two under leader election")
	fs.IntVar(&o.apiserverRestarts, "apiserver-restarts", 2, "kube-apiserver restarts in the faulty run")
	fs.IntVar(&o.etcdRests, "etcd-restarts", 1, "etcd restarts in the faulty run")
	fs.DurationVar(&o.webhookDown, "webhook-down", 30*time.Second, "how long every replica is kept down once in the faulty run (0: never)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the jobs' shapes and of the faults' moments")
	fs.DurationVar(&o.window, "window", 180*time.Second, "jobs are created evenly over this long")
	fs.DurationVar(&o.minRun, "min-run", 10*time.Second, "shortest run of a job's master")
	fs.DurationVar(&o.maxRun, "max-run", 40*time.Second, "longest run of a job's master")
	fs.DurationVar(&o.timeout, "timeout", 20*time.Minute, "give up (and fail) after this long")
	fs.StringVar(&o.cluster, "cluster", "troupe-chaos", "name of the harness's own kwok cluster")
	fs.StringVar(&o.out, "out", "chaos-results", "directory for the operator's logs and the harness's log")
	fs.BoolVar(&o.keep, "keep", false, "leave the cluster running at the end")
	return fs
}

// summary is the counts of the last line.
type summary struct {
	jobs, kills                                int
	differing, unfinished, duplicates, orphans int
	calmWrong                                  int
	panics                                     int
	restored, tampered                         int
	p50, p99                                   time.Duration
	hostfiles, hostfilesRestored               int
}

func (s *summary) tamper(rep *faultReport) {
	var ds []time.Duration
	for _, r := range rep.tampers {
		if r.Err != nil {
			continue
		}
		s.tampered++
		if r.Action == "edit-hostfile" {
			s.hostfiles++
		}
		if r.Restored {
			s.restored++
			ds = append(ds, r.RestoreTime)
			if r.Action == "edit-hostfile" {
				s.hostfilesRestored++
			}
		}
	}
	s.p50, s.p99 = percentile(ds, 50), percentile(ds, 99)
}

// line is the summary line, the harness's last.
func (s *summary) line() string {
	restore := "n/a (no tampering)"
	if s.tampered > 0 {
		restore = fmt.Sprintf("%.1f s", s.p99.Seconds())
	}
	return fmt.Sprintf("chaos: jobs %d, kills %d, differing %d, unfinished %d, duplicate launchers %d, orphans %d, restore p99 %s, panics %d",
		s.jobs, s.kills, s.differing, s.unfinished, s.duplicates, s.orphans, restore, s.panics)
}

// problems are the counts not met.
func (s *summary) problems(o options, rep *faultReport) []string {
	var out []string
	check := func(bad bool, format string, args ...any) {
		if bad {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	check(s.calmWrong > 0, "%d jobs ended otherwise than their spec says without faults", s.calmWrong)
	check(s.differing > 0, "%d jobs differ", s.differing)
	check(s.unfinished > 0, "%d jobs unfinished", s.unfinished)
	check(s.duplicates > 0, "%d duplicate launchers", s.duplicates)
	check(s.orphans != 0, "orphans %d", s.orphans)
	check(s.panics > 0, "%d panics", s.panics)
	check(s.kills < o.kills, "%d kills of %d", s.kills, o.kills)
	check(len(rep.apiserverRestarts) < o.apiserverRestarts, "%d kube-apiserver restarts of %d", len(rep.apiserverRestarts), o.apiserverRestarts)
	check(len(rep.etcdRestarts) < o.etcdRests, "%d etcd restarts of %d", len(rep.etcdRestarts), o.etcdRests)
	check(s.restored < s.tampered, "%d of %d tamperings not restored", s.tampered-s.restored, s.tampered)
	check(s.p99 > 2*time.Second, "restore p99 %.1f s > 2 s", s.p99.Seconds())
	check(rep.badRefused < rep.badTotal, "webhook down: %d of %d CEL-expressible bad specs admitted", rep.badTotal-rep.badRefused, rep.badTotal)
	check(rep.foreignUntouched < rep.foreign, "%d of %d foreign objects touched", rep.foreign-rep.foreignUntouched, rep.foreign)
	check(len(rep.errs) > 0, "%d fault errors", len(rep.errs))
	return out
}

// line describes the faults done.
func (r *faultReport) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: faults: kills %d (%d cold starts of one replica; of two, %d leaders and %d standbys), kube-apiserver restarts %s, etcd restarts %s",
		r.kills, r.coldKills, r.leaderKills, r.standbyKills, durations(r.apiserverRestarts), durations(r.etcdRestarts))
	if r.webhookDown > 0 {
		fmt.Fprintf(&b, ", webhooks down %.0f s (bad specs refused by the CRDs %d/%d)", r.webhookDown.Seconds(), r.badRefused, r.badTotal)
	}
	n, restored, hostfiles, hostfilesOK := 0, 0, 0, 0
	var ds []time.Duration
	for _, t := range r.tampers {
		n++
		if t.Restored {
			restored++
			ds = append(ds, t.RestoreTime)
		}
		if t.Action == "edit-hostfile" {
			hostfiles++
			if t.Restored {
				hostfilesOK++
			}
		}
	}
	if n == 0 {
		b.WriteString(", no tampering (package tamper not built in)")
	} else {
		fmt.Fprintf(&b, ", tamperings %d restored %d (p50 %.2f s, p99 %.2f s), hostfiles restored %d/%d, foreign objects untouched %d/%d",
			n, restored, percentile(ds, 50).Seconds(), percentile(ds, 99).Seconds(), hostfilesOK, hostfiles, r.foreignUntouched, r.foreign)
	}
	for _, t := range r.tampers {
		if t.Err != nil || !t.Restored {
			fmt.Fprintf(&b, "\nchaos: tampering %s of %s %s: restored %v, %v", t.Action, t.Target.Kind, t.Target.Name, t.Restored, t.Err)
		} else if t.RestoreTime > time.Second {
			fmt.Fprintf(&b, "\nchaos: tampering %s of %s %s: restored after %.2f s", t.Action, t.Target.Kind, t.Target.Name, t.RestoreTime.Seconds())
		}
	}
	return b.String()
}

func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "0"
	}
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%.1f s", d.Seconds()))
	}
	return fmt.Sprintf("%d (%s)", len(ds), strings.Join(parts, ", "))
}

// passLine says how a run went.
func passLine(name string, p *pass) string {
	counts := map[troupev1.JobPhase]int{}
	var last time.Time
	for _, js := range p.jobs {
		if !js.final.IsZero() {
			counts[js.phase]++
			if js.final.After(last) {
				last = js.final
			}
		}
	}
	took := 0.0
	if !last.IsZero() {
		took = last.Sub(p.start).Seconds()
	}
	return fmt.Sprintf("chaos: %s: %d jobs, %d Succeeded, %d Failed, %d not final; last final after %.0f s",
		name, len(p.jobs), counts[troupev1.JobSucceeded], counts[troupev1.JobFailed], p.unfinished(), took)
}

func sortedNames(p *pass) []string {
	var out []string
	for n := range p.jobs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// duplicates counts the faulty run's launcher pods that no attempt accounts for: pods of one
// launcher Job created while another of its pods still ran, pods created after their job had
// completed, and launcher Jobs beyond those of the undisturbed run plus one per launcher Job
// the tamperer deleted. Each is printed. troupe makes launcher Jobs, never their pods: an extra
// pod of one launcher Job is kube-controller-manager's, made when a create's answer was lost
// in an API server restart. Overlapping pods of one launcher Job of which the Job controller
// itself deleted one (its SuccessfulDelete event names the pod; removedByJob says), or whose
// later pod was made while an API server or etcd restart was under way or its controllers were
// catching up (duringRestart), are counted apart, in kube; outside those, an overlap would be
// a launcher Job that troupe built to let two pods run (its podReplacementPolicy).
func duplicates(calm *pass, calmWatch *launcherWatch, faulty *pass, faultyWatch *launcherWatch, tampers []tamperResult,
	removedByJob func(job, pod string) bool, duringRestart func(time.Time) bool) (n, kube int) {
	completion := func(p *pass) func(types.UID) time.Time {
		byUID := map[types.UID]time.Time{}
		for _, js := range p.jobs {
			byUID[js.uid] = js.completion
		}
		return func(uid types.UID) time.Time { return byUID[uid] }
	}
	calmCounts := calmWatch.counts(completion(calm))
	counts := faultyWatch.counts(completion(faulty))
	deleted := map[string]int{}
	for _, t := range tampers {
		if t.Action == "delete-master-job" && t.Err == nil {
			deleted[t.Target.Name]++
		}
	}
	for _, name := range sortedNames(faulty) {
		f := faulty.jobs[name]
		c := counts[f.uid]
		if c == nil || f.uid == "" {
			continue
		}
		ref := 1
		if cc := calmCounts[calm.jobs[name].uid]; cc != nil {
			ref = cc.jobs
		}
		extraJobs := max(0, c.jobs-ref-deleted[name])
		overlapping := 0
		for _, g := range c.overlaps {
			byJobController := slices.ContainsFunc(g.pods, func(pod string) bool { return removedByJob(g.job, pod) }) ||
				slices.ContainsFunc(g.lateCreated, duringRestart)
			if byJobController {
				kube += len(g.lateCreated)
			} else {
				overlapping += len(g.lateCreated)
			}
			fmt.Printf("chaos: %s %s: launcher Job %s had %d pods created while another ran (the Job controller's, deleted by it or made during an API server restart: %v):\n",
				f.shape.Kind, name, g.job, len(g.lateCreated), byJobController)
			for _, l := range g.detail {
				fmt.Println("chaos:   " + l)
			}
		}
		if d := overlapping + c.afterFinal + extraJobs; d > 0 {
			fmt.Printf("chaos: duplicate launchers of %s %s: %d pods while another ran, %d after completion, %d launcher Jobs beyond %d\n",
				f.shape.Kind, name, overlapping, c.afterFinal, extraJobs, ref+deleted[name])
			n += d
		}
	}
	return n, kube
}
