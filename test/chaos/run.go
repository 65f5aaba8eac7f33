package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/kinds"
	"github.com/troupe-dev/troupe/pkg/engine"
)

// jobState is what a run saw of one job.
type jobState struct {
	shape   shape
	uid     types.UID
	created time.Time
	phase   troupev1.JobPhase
	// final is when the job was first seen Succeeded or Failed (zero: never);
	// completion is its status.completionTime.
	final      time.Time
	completion time.Time
	// errs are the user's writes that did not go through within the bound.
	errs []error
}

// pass is one run of every shape in a namespace of its own.
type pass struct {
	ns    string
	c     client.Client
	mu    sync.Mutex
	jobs  map[string]*jobState // by job name
	start time.Time
}

func newPass(c client.Client, ns string, jobs []shape) *pass {
	p := &pass{ns: ns, c: c, jobs: map[string]*jobState{}}
	for _, s := range jobs {
		p.jobs[s.Name] = &jobState{shape: s}
	}
	return p
}

// userWriteTimeout bounds how long a user's write is retried: the API server or the webhooks
// may be down for a while (an API server restart, every operator replica killed).
const userWriteTimeout = 2 * time.Minute

// run creates every job at its offset, resumes and scales those that say so, and returns once
// every job has been seen final or bound has passed. beforeCreate, if set, runs just before a
// job is created (the foreign objects of the faulty run).
func (p *pass) run(ctx context.Context, bound time.Duration, beforeCreate func(ctx context.Context, s shape) func(context.Context)) {
	p.start = time.Now()
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var wg sync.WaitGroup
	for _, js := range p.jobs {
		wg.Go(func() { p.drive(ctx, js, beforeCreate) })
	}
	// Poll the jobs' status until each is final: a poll rather than a watch, so an API
	// server restart costs only the polls it fails.
	_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		p.poll(ctx)
		return p.unfinished() == 0, nil
	})
	cancel()
	wg.Wait()
}

// drive plays the user of one job: create, then resume or scale.
func (p *pass) drive(ctx context.Context, js *jobState, beforeCreate func(ctx context.Context, s shape) func(context.Context)) {
	s := js.shape
	if !sleepCtx(ctx, time.Until(p.start.Add(s.CreateAt))) {
		return
	}
	var after func(context.Context)
	if beforeCreate != nil {
		after = beforeCreate(ctx, s)
	}
	obj := s.object(p.ns)
	err := retry(ctx, func(ctx context.Context) error {
		err := p.c.Create(ctx, obj)
		if apierrors.IsAlreadyExists(err) {
			// An earlier try went through but its answer was lost.
			return nil
		}
		return err
	})
	p.mu.Lock()
	js.created = time.Now()
	if err != nil {
		js.errs = append(js.errs, fmt.Errorf("create: %w", err))
	}
	p.mu.Unlock()
	if err != nil {
		return
	}
	if after != nil {
		after(ctx)
	}
	patch := func(what, body string) {
		err := retry(ctx, func(ctx context.Context) error {
			return p.c.Patch(ctx, s.object(p.ns), client.RawPatch(types.MergePatchType, []byte(body)))
		})
		if err != nil {
			p.mu.Lock()
			js.errs = append(js.errs, fmt.Errorf("%s: %w", what, err))
			p.mu.Unlock()
		}
	}
	switch {
	case s.ResumeAfter > 0:
		if sleepCtx(ctx, s.ResumeAfter) {
			patch("resume", resumePatch)
		}
	case s.ScaleTo > 0:
		if !sleepCtx(ctx, s.ScaleAfter) {
			return
		}
		body, err := s.scalePatch(s.ScaleTo)
		if err != nil {
			p.mu.Lock()
			js.errs = append(js.errs, fmt.Errorf("scale: %w", err))
			p.mu.Unlock()
			return
		}
		patch("scale", body)
	}
}

// poll reads every job of the namespace once and records what it sees.
func (p *pass) poll(ctx context.Context) {
	for _, k := range kindNames() {
		list, err := listJobs(ctx, p.c, k, p.ns)
		if err != nil {
			continue // the API server may be restarting
		}
		p.mu.Lock()
		for _, j := range list {
			js, ok := p.jobs[j.GetName()]
			if !ok || js.shape.Kind != k {
				continue
			}
			st := j.JobStatus()
			js.uid = j.GetUID()
			js.phase = st.Phase
			if (st.Phase == troupev1.JobSucceeded || st.Phase == troupev1.JobFailed) && js.final.IsZero() {
				js.final = time.Now()
				if st.CompletionTime != nil {
					js.completion = st.CompletionTime.Time
				}
			}
		}
		p.mu.Unlock()
	}
}

func (p *pass) unfinished() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, js := range p.jobs {
		if js.final.IsZero() {
			n++
		}
	}
	return n
}

// running are the jobs seen Running at the last poll, for the tamperer.
func (p *pass) running() []shape {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []shape
	for _, js := range p.jobs {
		if js.phase == troupev1.JobRunning && js.final.IsZero() {
			out = append(out, js.shape)
		}
	}
	return out
}

// kindNames are the kinds the chaos run creates, in turn: every registered kind.
func kindNames() []string {
	var names []string
	for _, k := range kinds.All() {
		names = append(names, k.Name)
	}
	return names
}

// listJobs lists the jobs of one kind in ns, through the list type the client's scheme
// registers for it (<Kind>List).
func listJobs(ctx context.Context, c client.Client, kind, ns string) ([]engine.Object, error) {
	obj, err := c.Scheme().New(troupev1.GroupVersion.WithKind(kind + "List"))
	if err != nil {
		return nil, err
	}
	list, ok := obj.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%T is not a list", obj)
	}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Object, 0, len(items))
	for _, item := range items {
		job, ok := item.(engine.Object)
		if !ok {
			return nil, fmt.Errorf("%T is not a job", item)
		}
		out = append(out, job)
	}
	return out, nil
}

// retry calls f every 500 ms until it succeeds, ctx ends or userWriteTimeout passes; it
// returns f's last error.
func retry(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, userWriteTimeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = f(ctx)
		return last == nil, nil
	})
	if last != nil {
		return last
	}
	return err
}

// sleepCtx sleeps d, or less if ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
