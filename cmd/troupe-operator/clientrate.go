package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// limitRequests puts the operator's whole client budget (--kube-api-qps, --kube-api-burst)
// in one token bucket for every request of the process, in which events come last: an event
// is written only when the bucket is full, so it takes a token no other request is waiting for
// and leaves the burst to them.
//
// Every request goes through the bucket, so the flags bound all the operator sends. Inside
// the budget, what users and tools act on (creates of children, status writes) goes first:
// with one first-come bucket, the events of 200 jobs ending together (one Succeeded each)
// took every other token from their status writes, and a job's status said Succeeded as late
// as its event (docs/performance.md). Events are best-effort in Kubernetes; under a flood of
// jobs they wait until the operator's other requests leave room, each in a goroutine that
// client-go's event broadcaster starts for it (it drops an event only when its own dispatch
// queue of 1,000 is full, which handing each event to a goroutine rarely lets happen).
//
// client-go applies a rest.Config's rate limiter before a request is built, where it cannot
// tell an event from anything else; the limit is applied in the transport instead, and the
// config's own limiter is turned off.
//
// Once stopping is done (the operator received its stop signal), events take tokens as any
// request does: no reconcile needs the budget any more, and controller-runtime cancels the
// event writes still pending soon after, so an event held back until then would be lost.
func limitRequests(cfg *rest.Config, qps float64, burst int, stopping context.Context) {
	l := newEventsLast(qps, burst)
	context.AfterFunc(stopping, l.stop)
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &eventsLastTransport{eventsLast: l, next: rt}
	})
}

// Leader election's own budget: a renewal every RetryPeriod (2 s) is one GET and one PUT of the
// Lease, well under it.
const (
	leaderElectionQPS   = 5
	leaderElectionBurst = 10
)

// leaderElectionConfig is the client configuration of leader election: cfg as given, before
// limitRequests puts its requests in the shared bucket, with a small budget of its own. In the
// shared bucket, a backlog of reconciles or a flood of any other request (the readiness check
// read the API server on every probe, for anyone) delayed Lease renewals until the lease was
// lost, and with it every job's reconciles (docs/security.md).
func leaderElectionConfig(cfg *rest.Config) *rest.Config {
	le := rest.CopyConfig(cfg)
	le.QPS, le.Burst, le.RateLimiter = leaderElectionQPS, leaderElectionBurst, nil
	return le
}

// eventsLast is the bucket, and the gate through which events wait for it one at a time.
type eventsLast struct {
	limiter *rate.Limiter
	// gate holds the one event that waits for the bucket to fill. client-go's event
	// broadcaster sends each event from a goroutine of its own, so after a flood hundreds wait
	// at once; each looking at the bucket on a timer of its own took a tenth of the operator's
	// CPU (docs/performance.md). The others wait on the gate, which costs nothing.
	gate chan struct{}
	// stopping is closed when the operator stops: events no longer wait for a full bucket.
	stopping chan struct{}
	stopOnce sync.Once
}

func newEventsLast(qps float64, burst int) *eventsLast {
	return &eventsLast{
		limiter:  rate.NewLimiter(rate.Limit(qps), burst),
		gate:     make(chan struct{}, 1),
		stopping: make(chan struct{}),
	}
}

// stop lets events take tokens in turn with every other request, from now on.
func (l *eventsLast) stop() { l.stopOnce.Do(func() { close(l.stopping) }) }

type eventsLastTransport struct {
	*eventsLast
	next http.RoundTripper
}

func (t *eventsLastTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.wait(req); err != nil {
		return nil, err
	}
	return t.next.RoundTrip(req)
}

// wait takes a token for req. Any other request reserves the next token (rate.Limiter.Wait),
// so that waiting requests are served in turn; an event takes a token only when the bucket is
// full (bucketFull), which it never is while other requests have reserved the coming ones;
// once the operator is stopping, it reserves its token as they do.
func (l *eventsLast) wait(req *http.Request) error {
	ctx := req.Context()
	if !isEventWrite(req) {
		return l.limiter.Wait(ctx)
	}
	select {
	case l.gate <- struct{}{}:
	case <-l.stopping:
		return l.limiter.Wait(ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.gate }()
	for !l.bucketFull() || !l.limiter.Allow() {
		timer := time.NewTimer(l.untilFull())
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-l.stopping:
			timer.Stop()
			return l.limiter.Wait(ctx)
		case <-timer.C:
		}
	}
	return nil
}

// untilFull is how long the bucket takes to fill if nothing else takes a token, between 1 ms
// and 1 s.
func (l *eventsLast) untilFull() time.Duration {
	missing := float64(l.limiter.Burst()) - l.limiter.Tokens()
	d := time.Duration(missing / float64(l.limiter.Limit()) * float64(time.Second))
	return min(max(d, time.Millisecond), time.Second)
}

// bucketFull: the bucket holds its whole burst. Events wait for that, not for any spare token,
// so that they never spend the burst: a backlog of events (the Running and WorkersReady of 200
// new jobs) drained the bucket token by token as it refilled, and the status writes of jobs
// ending together then found it empty and went out at the sustained rate, one every 20 ms at
// 50 QPS, instead of the burst at once (docs/performance.md). An idle operator still sends
// events at the full rate: each one waits for the token it took to come back.
func (l *eventsLast) bucketFull() bool {
	return l.limiter.Tokens() >= float64(l.limiter.Burst())
}

// isEventWrite: req creates or updates an Event, core/v1 (/api/v1/namespaces/NS/events[/NAME])
// or events.k8s.io/v1 (/apis/events.k8s.io/v1/namespaces/NS/events[/NAME]). Reads of events (the
// engine lists a child's FailedCreate events) are requests like any other.
func isEventWrite(req *http.Request) bool {
	if req.Method == http.MethodGet {
		return false
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string // after the group and version
	switch {
	case len(parts) >= 2 && parts[0] == "api" && parts[1] == "v1":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis" && parts[1] == "events.k8s.io":
		rest = parts[3:]
	default:
		return false
	}
	return (len(rest) == 3 || len(rest) == 4) && rest[0] == "namespaces" && rest[2] == "events"
}
