package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// faultReport is what the faulty run did to the cluster and the operator.
type faultReport struct {
	mu sync.Mutex
	// Kills by kind: the only replica (a cold start), the leader of two (the standby takes
	// over), the standby of two.
	kills, coldKills, leaderKills, standbyKills int
	apiserverRestarts, etcdRestarts             []time.Duration
	webhookDown                                 time.Duration
	badRefused, badTotal                        int
	tampers                                     []tamperResult
	// foreign: foreign objects made before their jobs, and those released untouched.
	foreign, foreignUntouched int
	errs                      []error
	// timeline has a line per event, "+<s since the faults began> <event>: <outcome>", so that
	// a slow restore or an error can be read against what happened just before it.
	timeline []timelineEntry
	// restarts are the spans of the API server's and etcd's restarts, from the kill to
	// restartSettle after the API server served again.
	restarts []span
	// slow are the tamperings restored after more than a second, or not at all, with the
	// moments around them: the operator's log lines of that span are printed.
	slow []slowTamper
}

// span is a stretch of time.
type span struct{ from, to time.Time }

// restartSettle is how long after a restart kube-controller-manager's watches may still be
// catching up (they re-list with a back-off): a Job controller that lost a pod create's answer
// in the restart makes its extra pod in this time.
const restartSettle = 10 * time.Second

// duringRestart says whether t falls in a restart's span.
func (r *faultReport) duringRestart(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t = t.Truncate(time.Second) // a creationTimestamp's precision
	return slices.ContainsFunc(r.restarts, func(s span) bool {
		return !t.Before(s.from.Truncate(time.Second)) && !t.After(s.to)
	})
}

// slowTamper is a tampering of job name that began at from and was restored, or given up, at to.
type slowTamper struct {
	name     string
	from, to time.Time
}

type timelineEntry struct {
	offset time.Duration
	text   string
}

// logEvent adds the event that began at offset to the timeline.
func (r *faultReport) logEvent(offset time.Duration, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timeline = append(r.timeline, timelineEntry{offset, fmt.Sprintf(format, args...)})
}

// timelineLines are the timeline's lines in the order the events began (each is added when it
// ends).
func (r *faultReport) timelineLines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	entries := slices.Clone(r.timeline)
	slices.SortStableFunc(entries, func(a, b timelineEntry) int { return cmp.Compare(a.offset, b.offset) })
	var out []string
	for _, e := range entries {
		out = append(out, fmt.Sprintf("+%5.1f s %s", e.offset.Seconds(), e.text))
	}
	return out
}

func (r *faultReport) err(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// faultPlan is what the faulty run does, spread over window at random moments.
type faultPlan struct {
	kills, apiserverRestarts, etcdRestarts int
	webhookDown                            time.Duration
	tampers                                int
	window                                 time.Duration
}

// injectFaults runs plan's events one after the other at random moments of its window, while
// p's jobs run (an event that takes long delays the next). The first half of the kills hit one
// replica running without leader election (every kill a cold start); then two replicas run
// with --leader-elect, and each kill hits the leader or the standby at random, the killed one
// replaced at once as a Deployment would.
func (e *env) injectFaults(ctx context.Context, p *pass, plan faultPlan, rng *rand.Rand, rep *faultReport) {
	var events []string
	add := func(name string, n int) {
		for range n {
			events = append(events, name)
		}
	}
	add("kill", plan.kills)
	add("kube-apiserver", plan.apiserverRestarts)
	add("etcd", plan.etcdRestarts)
	add("tamper", plan.tampers)
	if plan.webhookDown > 0 {
		add("webhook-down", 1)
	}
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	at := make([]time.Duration, len(events))
	for i := range at {
		at[i] = time.Duration(rng.Float64() * float64(plan.window))
	}
	slices.Sort(at)
	start := time.Now()
	kill := 0
	for i, ev := range events {
		if !sleepCtx(ctx, time.Until(start.Add(at[i]))) {
			return
		}
		began := time.Since(start)
		switch ev {
		case "kill":
			rep.logEvent(began, "kill: %s", e.killOne(kill >= plan.kills/2, rng, rep))
			kill++
		case "kube-apiserver", "etcd":
			watches, werr := e.openWatches(ctx)
			d, err := e.restartComponent(ctx, ev)
			if err != nil {
				// It may have been down for a while all the same.
				rep.mu.Lock()
				rep.restarts = append(rep.restarts, span{from: start.Add(began), to: time.Now().Add(restartSettle)})
				rep.mu.Unlock()
				rep.logEvent(began, "restart %s: %v", ev, err)
				rep.err(fmt.Errorf("restart %s: %w", ev, err))
				continue
			}
			// The event ends once every watch open before it is open again (the next event, a
			// tampering among them, must not time the clients' back-off). A watch that never
			// comes back is told, not failed: the checks see what it costs (a restore that never
			// happens fails the run).
			if werr == nil {
				werr = e.waitWatchesBack(ctx, watches, time.Minute)
			}
			back := fmt.Sprintf(", every watch open before it open again after %.1f s", (time.Since(start) - began).Seconds())
			if werr != nil {
				back = ", " + werr.Error()
			}
			rep.logEvent(began, "restart %s: serving again after %.1f s%s", ev, d.Seconds(), back)
			rep.mu.Lock()
			rep.restarts = append(rep.restarts, span{from: start.Add(began), to: start.Add(began + d + restartSettle)})
			if ev == "etcd" {
				rep.etcdRestarts = append(rep.etcdRestarts, d)
			} else {
				rep.apiserverRestarts = append(rep.apiserverRestarts, d)
			}
			rep.mu.Unlock()
		case "tamper":
			e.tamper(ctx, p, rng, rep, start, began)
		case "webhook-down":
			e.webhookDown(ctx, plan.webhookDown, rep)
			rep.logEvent(began, "webhooks down: every replica stopped for %.0f s", plan.webhookDown.Seconds())
		}
	}
}

// killOne sends SIGKILL to one replica and starts its replacement. twoReplicas: the kill
// belongs to the second half, with two replicas under leader election; the first such kill is
// the switch from one replica. It returns which replica it killed, for the timeline.
func (e *env) killOne(twoReplicas bool, rng *rand.Rand, rep *faultReport) string {
	f := e.fleet
	f.ops.Lock()
	defer f.ops.Unlock()
	live := f.live()
	if len(live) == 0 {
		// Every replica is still starting (a failed start): nothing to kill now.
		rep.err(fmt.Errorf("kill %d: no replica runs", rep.kills+1))
		return "no replica runs"
	}
	what := "the only replica (a cold start follows)"
	if !twoReplicas || !f.leaderElect {
		// One replica without leader election: kill it; the new one is a cold start.
		for _, r := range live {
			f.kill(r)
		}
		rep.mu.Lock()
		rep.kills++
		rep.coldKills++
		rep.mu.Unlock()
		if twoReplicas {
			// The switch: never a replica without election beside elected ones.
			f.leaderElect = true
		}
	} else {
		leader := f.leader()
		victim := live[rng.IntN(len(live))]
		if leader != nil && rng.IntN(2) == 0 {
			victim = leader
		}
		f.kill(victim)
		rep.mu.Lock()
		rep.kills++
		if victim == leader {
			rep.leaderKills++
			what = "the leader of two"
		} else {
			rep.standbyKills++
			what = "the standby of two"
		}
		rep.mu.Unlock()
	}
	if err := f.ensure(); err != nil {
		rep.err(err)
	}
	return what
}

// tamper tampers with up to two running jobs at once, once a replica leads and runs its job
// controllers (so the restore time is the operator's, not a failover's or a cold start's; a
// restart's event ended only once every watch was open again, so not a watch's back-off).
func (e *env) tamper(ctx context.Context, p *pass, rng *rand.Rand, rep *faultReport, start time.Time, began time.Duration) {
	if !e.fleet.waitLeader(ctx, time.Minute) {
		rep.logEvent(began, "tamper: no operator replica leads after 1m")
		rep.err(fmt.Errorf("tamper: no operator replica leads after 1m"))
		return
	}
	waited := time.Since(start) - began
	// Only jobs of kinds with tamperings, in name order (the seed alone picks among them). The
	// event ends when its tamperings have: the next fault (a leader's kill, whose successor
	// waits out the lease) must not land in the middle of a restore being timed.
	running := slices.DeleteFunc(p.running(), func(s shape) bool { return len(tampering.Actions(s.Kind)) == 0 })
	slices.SortFunc(running, func(a, b shape) int { return strings.Compare(a.Name, b.Name) })
	if len(running) == 0 {
		rep.logEvent(began, "tamper: no job of a kind with tamperings runs")
		return
	}
	rng.Shuffle(len(running), func(i, j int) { running[i], running[j] = running[j], running[i] })
	var wg sync.WaitGroup
	for _, s := range running[:min(2, len(running))] {
		actions := tampering.Actions(s.Kind)
		action := actions[rng.IntN(len(actions))]
		wg.Go(func() {
			from := time.Now()
			r := tampering.Do(ctx, e.c, target{Kind: s.Kind, Namespace: p.ns, Name: s.Name}, action, 30*time.Second)
			if r.Err == nil && (!r.Restored || r.RestoreTime > time.Second) {
				rep.mu.Lock()
				rep.slow = append(rep.slow, slowTamper{name: s.Name, from: from, to: time.Now()})
				rep.mu.Unlock()
			}
			outcome := fmt.Sprintf("restored after %.2f s", r.RestoreTime.Seconds())
			if !r.Restored {
				outcome = fmt.Sprintf("not restored: %v", r.Err)
			}
			rep.logEvent(began, "tamper (a caught-up leader after %.1f s): %s of %s %s: %s", waited.Seconds(), action, s.Kind, s.Name, outcome)
			rep.mu.Lock()
			rep.tampers = append(rep.tampers, r)
			rep.mu.Unlock()
		})
	}
	wg.Wait()
}

// webhookDown kills every replica and keeps the operator down for d, creating the bad-spec
// corpus meanwhile; the replicas killed here are not counted as kills.
func (e *env) webhookDown(ctx context.Context, d time.Duration, rep *faultReport) {
	f := e.fleet
	start := time.Now()
	f.ops.Lock()
	f.down = true
	f.stopAll()
	f.ops.Unlock()
	refused, total, err := tampering.WebhookDown(ctx, e.c, filepath.Join(e.o.repoRoot, "test", "testdata", "admission", "bad"))
	if err != nil {
		rep.err(fmt.Errorf("webhook down: %w", err))
	}
	sleepCtx(ctx, time.Until(start.Add(d)))
	f.ops.Lock()
	defer f.ops.Unlock()
	f.down = false
	rep.mu.Lock()
	rep.webhookDown = time.Since(start)
	rep.badRefused, rep.badTotal = refused, total
	rep.mu.Unlock()
	if err := f.ensure(); err != nil {
		rep.err(err)
	}
}

// foreignBefore is the faulty run's beforeCreate: for every tenth job, a foreign object with
// one of its children's names, released (checked untouched, deleted) a few seconds after the
// job is created, so the job first meets the conflict and then runs.
func (e *env) foreignBefore(ns string, rep *faultReport) func(ctx context.Context, s shape) func(context.Context) {
	return func(ctx context.Context, s shape) func(context.Context) {
		var n int
		_, _ = fmt.Sscanf(s.Name[len(s.Name)-3:], "%d", &n)
		if n%10 != 5 {
			return nil
		}
		var release func(context.Context) error
		err := retry(ctx, func(ctx context.Context) (err error) {
			release, err = tampering.PreCreateForeign(ctx, e.c, target{Kind: s.Kind, Namespace: ns, Name: s.Name})
			return err
		})
		if err != nil {
			rep.err(fmt.Errorf("foreign object before %s: %w", s.Name, err))
			return nil
		}
		if release == nil {
			return nil
		}
		rep.mu.Lock()
		rep.foreign++
		rep.mu.Unlock()
		return func(ctx context.Context) {
			sleepCtx(ctx, 5*time.Second)
			if err := retry(ctx, release); err != nil {
				rep.err(fmt.Errorf("foreign object of %s: %w", s.Name, err))
				return
			}
			rep.mu.Lock()
			rep.foreignUntouched++
			rep.mu.Unlock()
		}
	}
}
