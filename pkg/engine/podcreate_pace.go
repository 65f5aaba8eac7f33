package engine

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The FailedCreate lookups of podcreate.go are uncached LISTs in the operator's shared API
// budget. Made on every pass and every 10 s while a child lacked pods, they let one tenant's
// stuck jobs (a ResourceQuota they exceed, say) spend the budget every other job needs. So a
// job looks only once its children have lacked pods for podCreateGrace (a controller creates
// pods within moments; most jobs never look), then again after podCreateFirstInterval,
// doubling up to podCreateMaxInterval; between lookups the job reports what the last one
// found. A child that gets its pods ends the pacing, and a later lack starts it afresh.
const (
	podCreateGrace         = 5 * time.Second
	podCreateFirstInterval = 10 * time.Second
	podCreateMaxInterval   = 5 * time.Minute
)

// podCreatePace holds, per job, when its next FailedCreate lookup is due.
type podCreatePace struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]*podCreateLookups
}

type podCreateLookups struct {
	uid      types.UID // a job deleted and created again under its name starts afresh
	next     time.Time
	interval time.Duration
	// found is what the last lookup found, reported until the next one.
	found []string
}

func newPodCreatePace() *podCreatePace {
	return &podCreatePace{jobs: map[types.NamespacedName]*podCreateLookups{}}
}

// due reports whether the job lacking pods should look now; if not, what the last lookup found
// and how long until the next one.
func (p *podCreatePace) due(key types.NamespacedName, uid types.UID, now time.Time) (look bool, found []string, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.jobs[key]
	if !ok || l.uid != uid {
		l = &podCreateLookups{uid: uid, next: now.Add(podCreateGrace), interval: podCreateFirstInterval}
		p.jobs[key] = l
	}
	if wait := l.next.Sub(now); wait > 0 {
		return false, l.found, wait
	}
	return true, nil, 0
}

// looked records a lookup's findings and returns how long until the next one.
func (p *podCreatePace) looked(key types.NamespacedName, now time.Time, found []string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.jobs[key]
	if !ok {
		return podCreateFirstInterval
	}
	wait := l.interval
	l.found, l.next, l.interval = found, now.Add(wait), min(2*l.interval, podCreateMaxInterval)
	return wait
}

// forget ends the job's pacing: its children have their pods, it ended, or it is gone.
func (p *podCreatePace) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.jobs, key)
}
